"""The companion on a session (a scripted conductor on loopback): what its sessionStart says, results
in parts, calls sent again never run twice (also by a companion started again), progress and
cancelling on the wire, the devices it shows, and the command line."""

from __future__ import annotations

import asyncio
import io
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from shared.wire.protocol import (
    DevicesChanged,
    DeviceSeen,
    ErrorCode,
    ErrorPayload,
    SessionStart,
    ToolCall,
    ToolCancel,
    ToolProgress,
    ToolResult,
    make_event,
)
from voiceide_client.command_line import cli
from voiceide_client.command_line.companion import latest_session
from voiceide_client.companion.device import companion_device, device_id, device_name
from voiceide_client.companion.display import CompanionDisplay
from voiceide_client.companion.session import REFUSED, Companion
from voiceide_client.connection.link import scaled_backoff
from voiceide_client.rendering.transcript import TranscriptRenderer

from .fake_conductor import FakeConductor, FakeSession, async_test

FAST = scaled_backoff(0.01)
SESSION = "0b5f6f64-8c43-4c0e-9a64-9d0c2f6e2a11"
PY = sys.executable


def companion_for(fake: FakeConductor, root: Path, journal: Path | None = None, **kwargs: Any) -> Companion:
    device = companion_device(root, display=True, machine="test-machine")
    kwargs.setdefault("display", CompanionDisplay(TranscriptRenderer(io.StringIO(), err=io.StringIO())))
    return Companion(fake.url, SESSION, root, device=device, journal_folder=journal, backoff=FAST, **kwargs)


async def poll(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    """Wait for what no event announces (a file written, a run stopped)."""
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.02)


def results_for(session: FakeSession, call_id: str) -> list[ToolResult]:
    return [r for r in session.results() if r.call_id == call_id]


def joined(parts: list[ToolResult]) -> str:
    return "".join(p.result or "" for p in sorted(parts, key=lambda p: p.part or 0))


def test_the_device_is_the_same_for_a_folder_on_a_machine_and_named_for_a_person(tmp_path: Path) -> None:
    first = device_id(tmp_path, "machine-a")
    assert first == device_id(tmp_path / ".", "machine-a") and first.startswith("desk-") and len(first) == 21
    assert first != device_id(tmp_path, "machine-b") and first != device_id(tmp_path / "x", "machine-a")
    home = tmp_path / "home"
    (home / "src" / "app").mkdir(parents=True)
    assert device_name(home / "src" / "app", host="MacBook.local", home=home) == "MacBook — ~/src/app"
    deep = home / ("d" * 40) / ("e" * 40)
    deep.mkdir(parents=True)
    name = device_name(deep, host="MacBook", home=home)
    assert len(name) == 64 and name.startswith("MacBook — …") and name.endswith("e" * 40)
    assert companion_device(tmp_path, display=False, machine="m").roles == ("tools",)
    assert companion_device(tmp_path, display=True, machine="m").roles == ("display", "tools")


@async_test
async def test_the_session_start_carries_the_device_and_the_declared_tools_and_no_capabilities(tmp_path: Path) -> None:
    (tmp_path / ".voiceide.toml").write_text('build = "swift build"\n')
    async with FakeConductor() as fake, companion_for(fake, tmp_path) as companion:
        await fake.wait_until(lambda: fake.connections and fake.connections[0].session_start is not None)
    start = fake.connections[0].session_start
    assert isinstance(start, SessionStart) and start.session_id == SESSION
    wire = make_event(start).to_wire()["kind"]["sessionStart"]
    assert wire["device"] == {
        "id": device_id(tmp_path, "test-machine"),
        "name": companion.device.name,
        "roles": ["display", "tools"],
    }
    assert "capabilities" not in wire
    tools = {tool["name"]: tool for tool in wire["tools"]}
    assert sorted(tools) == [
        "build.run", "editor.openFile", "editor.readFile", "editor.replaceText", "git.diff", "git.status",
        "project.listFiles", "project.search", "tests.run",
    ]  # fmt: skip
    assert tools["editor.replaceText"]["effects"] == "changes" and tools["build.run"]["background"] is True
    assert "`swift build`" in tools["build.run"]["description"]


@async_test
async def test_a_big_file_goes_in_parts_and_a_replayed_call_resends_the_same_parts(tmp_path: Path) -> None:
    text = "".join(f"line {n:05d}: let value = {n}\n" for n in range(3_400))  # about 98 KB: four frames
    (tmp_path / "big.swift").write_text(text)
    async with FakeConductor() as fake, companion_for(fake, tmp_path) as companion:
        session = fake.session(SESSION)
        call = ToolCall(call_id="tooluse_read1", name="editor.readFile", arguments='{"path": "big.swift"}')
        await session.send(call)
        await session.wait_until(lambda: len(results_for(session, "tooluse_read1")) == 4)
        await session.send(call)  # the conductor sends the call again (a reconnect)
        await session.wait_until(lambda: len(results_for(session, "tooluse_read1")) == 8)
    events = [e for _, e in session.received if isinstance(e.payload, ToolResult)]
    first, again = events[:4], events[4:]
    assert [e.payload.part for e in first] == [0, 1, 2, 3] and all(e.payload.parts == 4 for e in first)
    assert json.loads(joined([e.payload for e in first])) == {"path": "big.swift", "text": text, "truncated": False}
    assert [e.id for e in again] == [e.id for e in first]  # the very same events: taken at most once
    assert all(len(frame.encode()) <= 32 * 1024 for frame in fake.connections[0].frames if isinstance(frame, str))
    assert [c.name for c in companion.client.tool_calls] == ["editor.readFile"]


@async_test
async def test_an_edit_sent_again_is_applied_once_and_answered_with_the_same_result(tmp_path: Path) -> None:
    source = tmp_path / "main.swift"
    source.write_text("let x = 1\nlet y = 2\n")
    edit = {"path": "main.swift", "startLine": 1, "endLine": 1, "text": "let x = 42"}
    call = ToolCall(call_id="tooluse_edit1", name="editor.replaceText", arguments=json.dumps(edit))
    async with FakeConductor() as fake, companion_for(fake, tmp_path, tmp_path / "state") as companion:
        session = fake.session(SESSION)
        for count in (1, 2, 3):
            await session.send(call)
            await session.wait_until(lambda: len(results_for(session, "tooluse_edit1")) == count)  # noqa: B023
    assert source.read_text() == "let x = 42\nlet y = 2\n"
    answers = [e for _, e in session.received if isinstance(e.payload, ToolResult)]
    assert json.loads(answers[0].payload.result or "")["insertedLines"] == 1
    assert len({e.id for e in answers}) == 1  # the same event each time
    assert len(companion.client.repeated_calls) == 2


@async_test
async def test_a_companion_started_again_answers_a_finished_call_from_its_journal(tmp_path: Path) -> None:
    workspace, journal = tmp_path / "app", tmp_path / "state"
    workspace.mkdir()
    source = workspace / "main.swift"
    source.write_text("a\nb\n")
    edit = ToolCall(
        call_id="tooluse_edit2",
        name="editor.replaceText",
        arguments=json.dumps({"path": "main.swift", "startLine": 2, "endLine": 2, "text": "B"}),
    )
    async with FakeConductor() as fake:
        session = fake.session(SESSION)
        async with companion_for(fake, workspace, journal):
            await session.send(edit)
            await session.wait_until(lambda: len(results_for(session, "tooluse_edit2")) == 1)
        async with companion_for(fake, workspace, journal) as again:  # a new process, the same device
            await session.send(edit)
            await session.wait_until(lambda: len(results_for(session, "tooluse_edit2")) == 2)
            assert again.client.tool_calls[0].name == "editor.replaceText"
    first, second = results_for(session, "tooluse_edit2")
    assert source.read_text() == "a\nB\n" and second.result == first.result and second.error is None


@async_test
async def test_a_build_cut_by_a_restart_is_answered_at_once_by_the_next_companion_and_not_run_again(
    tmp_path: Path,
) -> None:
    workspace, journal = tmp_path / "app", tmp_path / "state"
    workspace.mkdir()
    runs = workspace / "runs.txt"
    script = f"import time; open({str(runs)!r}, 'a').write('run '); time.sleep(30)"
    (workspace / ".voiceide.toml").write_text(f'build = ["{PY}", "-c", "{script}"]\n')
    build = ToolCall(call_id="tooluse_build9", name="build.run", arguments="{}")
    async with FakeConductor() as fake:
        session = fake.session(SESSION)
        async with companion_for(fake, workspace, journal, kill_grace=0.2):
            await session.send(build)
            await poll(lambda: runs.exists() and runs.read_text() == "run ")
        # closed while the build ran: it was stopped. The conductor does not send a background call
        # again (it waits for its result): the next companion answers it as soon as it is connected
        async with companion_for(fake, workspace, journal) as again:
            await session.wait_until(lambda: len(results_for(session, "tooluse_build9")) == 1)
            assert [r.call_id for r in again.answered_at_start] == ["tooluse_build9"]
            await session.send(build)  # a conductor that does send it again gets the same answer
            await session.wait_until(lambda: len(results_for(session, "tooluse_build9")) == 2)
        async with companion_for(fake, workspace, journal) as third:
            assert third.answered_at_start == []  # answered once: not again at the next start
    first, second = results_for(session, "tooluse_build9")
    assert first.error == "the companion restarted while build.run ran; the build was not run again"
    assert second.error == first.error and first.result is None
    assert runs.read_text() == "run "  # once


@async_test
async def test_a_call_left_unfinished_on_another_session_is_not_answered_on_this_one(tmp_path: Path) -> None:
    workspace, journal = tmp_path / "app", tmp_path / "state"
    workspace.mkdir()
    (workspace / ".voiceide.toml").write_text(f'test = ["{PY}", "-c", "import time; time.sleep(30)"]\n')
    other = "5d0e2b1c-3f4a-4b6c-8d7e-9f0a1b2c3d4e"
    async with FakeConductor() as fake:
        session = fake.session(SESSION)
        async with companion_for(fake, workspace, journal, kill_grace=0.2) as first:
            await session.send(ToolCall(call_id="tooluse_t7", name="tests.run", arguments="{}"))
            await poll(lambda: first.router.running == ["tooluse_t7"])
        device = companion_device(workspace, display=True, machine="test-machine")
        elsewhere = Companion(fake.url, other, workspace, device=device, journal_folder=journal, backoff=FAST)
        async with elsewhere:
            assert elsewhere.answered_at_start == []
        async with companion_for(fake, workspace, journal) as again:
            assert [r.error for r in again.answered_at_start] == [
                "the companion restarted while tests.run ran; the tests were not run again"
            ]
    assert fake.session(other).results() == []


@async_test
async def test_an_id_used_again_by_another_session_or_with_other_arguments_is_a_new_call(tmp_path: Path) -> None:
    workspace, journal = tmp_path / "app", tmp_path / "state"
    workspace.mkdir()
    source = workspace / "main.swift"
    source.write_text("a\nb\n")

    def edit(line: int, text: str) -> ToolCall:
        arguments = {"path": "main.swift", "startLine": line, "endLine": line, "text": text}
        return ToolCall(call_id="tooluse_same", name="editor.replaceText", arguments=json.dumps(arguments))

    other = "5d0e2b1c-3f4a-4b6c-8d7e-9f0a1b2c3d4e"
    device = companion_device(workspace, display=True, machine="test-machine")
    async with FakeConductor() as fake:
        session, elsewhere = fake.session(SESSION), fake.session(other)
        async with companion_for(fake, workspace, journal):
            await session.send(edit(1, "A"))
            await session.wait_until(lambda: len(results_for(session, "tooluse_same")) == 1)
        async with Companion(fake.url, other, workspace, device=device, journal_folder=journal, backoff=FAST):
            await elsewhere.send(edit(2, "B"))  # another session: the old record must not answer it
            await elsewhere.wait_until(lambda: len(results_for(elsewhere, "tooluse_same")) == 1)
        async with companion_for(fake, workspace, journal):
            await session.send(edit(2, "C"))  # this session, the same id, other arguments
            await session.wait_until(lambda: len(results_for(session, "tooluse_same")) == 2)
    assert source.read_text() == "A\nC\n"
    first, again = results_for(session, "tooluse_same")
    assert (json.loads(first.result or "")["startLine"], json.loads(again.result or "")["startLine"]) == (1, 2)
    assert json.loads(results_for(elsewhere, "tooluse_same")[0].result or "")["startLine"] == 2


@async_test
async def test_progress_goes_out_while_a_build_runs_and_a_cancel_stops_it_unanswered(tmp_path: Path) -> None:
    script = (
        "import time\\nfor n in range(1, 100):\\n    print(f'[{n}/99] Compiling', flush=True)\\n    time.sleep(0.1)"
    )
    (tmp_path / ".voiceide.toml").write_text(f'build = ["{PY}", "-c", "{script}"]\n')
    out = io.StringIO()
    display = CompanionDisplay(TranscriptRenderer(out, err=io.StringIO()))
    async with (
        FakeConductor() as fake,
        companion_for(fake, tmp_path, display=display, progress_every=0.2, kill_grace=0.2) as companion,
    ):
        session = fake.session(SESSION)
        await session.send(ToolCall(call_id="tooluse_b1", name="build.run", arguments="{}"))

        def progress() -> list[ToolProgress]:
            return [e.payload for _, e in session.received if isinstance(e.payload, ToolProgress)]

        await session.wait_until(lambda: len(progress()) >= 2)
        await session.send(ToolCancel(callId="tooluse_b1", name="build.run", reason="cancelled by the user"))
        await poll(lambda: companion.router.running == [])
        await asyncio.sleep(0.3)  # room for a result that must not come
    assert all(p.call_id == "tooluse_b1" and p.fraction is not None and 0 < p.fraction < 1 for p in progress())
    assert results_for(session, "tooluse_b1") == [] and companion.router.cancelled == ["tooluse_b1"]
    assert "→ tool build.run {}" in out.getvalue() and "[cancelled] build.run: cancelled by the user" in out.getvalue()


@async_test
async def test_speech_is_answered_as_not_played_and_the_devices_are_shown(tmp_path: Path) -> None:
    out = io.StringIO()
    display = CompanionDisplay(TranscriptRenderer(out, err=io.StringIO()))
    phone = DeviceSeen(id="iphone-2c1d", name="Ana's iPhone", roles=("voice", "display"), connectedAt="t")
    async with FakeConductor() as fake, companion_for(fake, tmp_path, display=display) as companion:
        session = fake.session(SESSION)
        spoken = await session.call("tts.speak", {"text": "The build succeeded."})
        me = DeviceSeen(id=companion.device.id, name="Mac", roles=("display", "tools"), connectedAt="t", self=True)
        await session.send(DevicesChanged(devices=(phone, me), joined="iphone-2c1d"), seq=False)
        await companion.client.wait_for(lambda e: isinstance(e.payload, DevicesChanged))
    assert json.loads(spoken.result or "") == {"spoken": False, "heardText": "", "reason": "no_voice"}
    shown = out.getvalue()
    assert "[device] joined: Ana's iPhone" in shown
    assert "[devices] Ana's iPhone (voice, display); Mac (display, tools) — this one" in shown


@async_test
async def test_a_session_with_four_devices_refuses_the_companion_and_it_stops(tmp_path: Path) -> None:
    async with FakeConductor() as fake, companion_for(fake, tmp_path) as companion:
        session = fake.session(SESSION)
        running = asyncio.create_task(companion.run())
        await session.send(ErrorPayload(code=str(ErrorCode.TOO_MANY_DEVICES), message="4 devices"), seq=False)
        assert await asyncio.wait_for(running, 5) == REFUSED
    assert companion.refused == "4 devices"


class Listing:
    """A stand-in for the sessions API's list route."""

    def __init__(self, active: list[dict[str, Any]], every: list[dict[str, Any]]) -> None:
        self.active, self.every = active, every
        self.asked: list[dict[str, Any]] = []

    def list(self, **query: Any) -> dict[str, Any]:
        self.asked.append(query)
        return {"sessions": self.active if query.get("status") == "active" else self.every, "nextCursor": None}


@async_test
async def test_latest_is_the_session_open_now_else_the_newest_not_ended() -> None:
    open_now = {"id": "a", "status": "active"}
    assert await latest_session(Listing([open_now], [])) == open_now  # type: ignore[arg-type]
    newest = [{"id": "e", "status": "ended"}, {"id": "i", "status": "idle"}]
    listing = Listing([], newest)
    assert await latest_session(listing) == {"id": "i", "status": "idle"}  # type: ignore[arg-type]
    assert listing.asked == [{"status": "active", "limit": 1}, {"limit": 20}]
    assert await latest_session(Listing([], [{"id": "e", "status": "ended"}])) is None  # type: ignore[arg-type]


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = asyncio.run(cli.run(list(argv), stdin=io.StringIO(), stdout=out, stderr=err, backoff=FAST))
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(
    ("argv", "why"),
    [
        (["--session", SESSION, "--latest"], "not allowed with argument"),
        ([], "one of the arguments --session --latest is required"),
        (["--session", SESSION, "--url", "ws://127.0.0.1:9/?token=abc"], "must not carry a token"),
        (["--session", SESSION, "--workspace", "/no/such/folder"], "no such folder"),
        (["--session", SESSION, "--name", "x" * 65], "--name: 1 to 64 characters"),
    ],
)
def test_companion_usage_errors(argv: list[str], why: str) -> None:
    with pytest.raises(SystemExit) as exited:
        run_cli("companion", *argv)
    assert exited.value.code == 2
