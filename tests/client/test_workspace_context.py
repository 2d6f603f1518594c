"""The companion's ``workspaceContext``: what it gathers from its folder (the folder's name, the
followed or newest file, the branch, the changed files, the problems of the last run, the running
builds), every path relative, the wire's limits kept, a git that fails leaving fields out; and when
it is sent: after the session is joined, again on a change, never with ``--no-context``."""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from shared.wire.protocol import ErrorCode, ErrorPayload, Event, SessionStart, ToolResult, make_event
from shared.wire.workspace import (
    MAX_CHANGED_FILES,
    MAX_DIAGNOSTICS,
    MAX_RUNNING_TASKS,
    MAX_TASK_NAME,
    WorkspaceContext,
    WorkspaceNames,
)
from voiceide_client.command_line import cli
from voiceide_client.companion.context_sender import ContextSender, ContextTiming
from voiceide_client.companion.device import companion_device
from voiceide_client.companion.diagnostics import parse_diagnostics
from voiceide_client.companion.session import Companion
from voiceide_client.companion.workspace import CompanionWorkspace
from voiceide_client.companion.workspace_context import Runs, gather_context
from voiceide_client.connection.link import scaled_backoff

from .fake_conductor import FakeConductor, FakeSession, async_test
from .test_companion_cli import StandInApi, api, argv_for  # noqa: F401 (api: the sessions API fixture)

SESSION = "0b5f6f64-8c43-4c0e-9a64-9d0c2f6e2a11"
FAST = ContextTiming(poll_s=0.05, min_gap_s=0.05, names_every_s=0.2)
DAY = 86_400


def git(root: Path, *args: str) -> str:
    command = ["git", "-C", str(root), "-c", "user.email=dev@example.com", "-c", "user.name=Dev", *args]
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout


def write(root: Path, path: str, text: str = "x\n", *, age_days: float = 0) -> Path:
    """A file of ``root``, modified ``age_days`` ago (the newest file is chosen by that)."""
    file = root / path
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(text)
    when = 1_700_000_000 + 100 * DAY - age_days * DAY
    os.utime(file, (when, when))
    return file


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "my-app"
    write(root, "src/users.ts", "export function getUserById(id: string) {}\n", age_days=9)
    write(root, "src/main.py", "def main():\n    pass\n", age_days=8)
    write(root, "README.md", "# App\n", age_days=7)
    write(root, ".gitignore", "build/\n*.log\n", age_days=7)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "first")
    return root


def opened(context: WorkspaceContext) -> str | None:
    return context.open_file.path if context.open_file is not None else None


def wire(context: WorkspaceContext) -> dict[str, object]:
    return make_event(context).to_wire()["kind"]["workspaceContext"]


def test_the_context_names_the_folder_its_branch_changes_and_newest_file_all_relative(repo: Path) -> None:
    write(repo, "src/users.ts", "export function getUserById(id: number) {}\n", age_days=1)
    write(repo, "src/new_feature.py", "X = 1\n", age_days=2)
    write(repo, "build/out.js", "generated\n", age_days=0)  # ignored: never the open file
    write(repo, "debug.log", "noise\n", age_days=0)
    context = gather_context(repo)
    assert context.workspace == "my-app"
    assert context.branch == "main"
    assert sorted(context.changed_files) == ["src/new_feature.py", "src/users.ts"]
    assert context.open_file is not None
    assert (context.open_file.path, context.open_file.language, context.open_file.cursor_line) == (
        "src/users.ts",
        "typescript",
        None,
    )
    assert context.diagnostics == () and context.running_tasks == ()
    serialized = make_event(context).to_json()
    assert str(repo.parent) not in serialized and '"/' not in serialized and "~" not in serialized


def test_the_followed_file_wins_over_the_newest_one(repo: Path) -> None:
    write(repo, "README.md", "# App, changed\n", age_days=0)
    assert opened(gather_context(repo)) == "README.md"
    followed = gather_context(repo, follow="src/main.py").open_file
    assert followed is not None and (followed.path, followed.language) == ("src/main.py", "python")
    absolute = gather_context(repo, follow=str(repo / "src" / "users.ts")).open_file
    assert absolute is not None and absolute.path == "src/users.ts"
    for elsewhere in ("../outside.py", "/etc/hostname", "src/missing.py"):  # not a file of the folder: the newest
        assert opened(gather_context(repo, follow=elsewhere)) == "README.md"


def test_a_folder_inside_a_bigger_repository_sees_its_own_changes_relative_to_it(repo: Path) -> None:
    write(repo, "src/users.ts", "changed\n")
    write(repo, "README.md", "changed\n")
    context = gather_context(repo / "src")
    assert context.workspace == "src" and context.branch == "main"
    assert context.changed_files == ("users.ts",)
    assert context.open_file is not None and context.open_file.path == "users.ts"


def test_without_git_a_walk_finds_the_newest_file_and_branch_and_changes_are_left_out(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    write(root, "app/view.swift", "struct View {}\n", age_days=3)
    write(root, "node_modules/pkg/index.js", "x\n", age_days=0)
    write(root, ".cache/state.json", "{}\n", age_days=0)
    write(root, "build/output.o", "x\n", age_days=0)
    context = gather_context(root)
    assert context.open_file is not None and (context.open_file.path, context.open_file.language) == (
        "app/view.swift",
        "swift",
    )
    assert context.branch is None and context.changed_files == ()
    assert set(wire(context)) >= {"workspace", "openFile", "changedFiles", "diagnostics", "runningTasks"}


def test_a_git_that_fails_or_is_missing_leaves_its_fields_out_and_never_raises(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(repo, "src/users.ts", "changed\n", age_days=0)
    slow = gather_context(repo, timeout=1e-6)  # every git passes its time limit
    assert slow.branch is None and slow.changed_files == () and slow.workspace == "my-app"
    monkeypatch.setenv("PATH", str(repo / "no-such-bin"))
    missing = gather_context(repo)
    assert missing.branch is None and missing.changed_files == ()
    assert missing.open_file is not None and missing.open_file.path == "src/users.ts"  # found by the walk


def test_changed_files_running_tasks_and_diagnostics_keep_the_wire_limits(repo: Path) -> None:
    for number in range(MAX_CHANGED_FILES + 15):
        write(repo, f"gen/file_{number:03d}.py")
    git(repo, "add", "gen")  # staged: listed one by one (an untracked folder is one entry)
    output = "\n".join(f"src/main.py:{line}:1: error: problem {line}" for line in range(1, 40))
    tasks = tuple(f"test: pytest -k case_{n} " + "x" * 300 for n in range(MAX_RUNNING_TASKS + 3))
    context = gather_context(repo, runs=Runs(running=tasks, last_output=output))
    assert len(context.changed_files) == MAX_CHANGED_FILES
    assert len(context.running_tasks) == MAX_RUNNING_TASKS
    assert all(len(task) == MAX_TASK_NAME for task in context.running_tasks)
    assert len(context.diagnostics) == MAX_DIAGNOSTICS
    assert [d.line for d in context.diagnostics] == list(range(1, MAX_DIAGNOSTICS + 1))


def test_diagnostics_are_read_from_compilers_tracebacks_and_pytest_inside_the_folder_only(repo: Path) -> None:
    output = "\n".join(
        [
            "Compiling…",
            f"{repo}/src/users.ts:12:5: error: cannot find 'userId' in scope",
            "src/main.py:3: warning: unused variable 'x'  [unused]",
            "/usr/include/stdio.h:10:1: error: outside the folder",
            "../elsewhere.c:1:1: error: outside too",
            "src/missing.c:1:1: error: no such file",
            "src/users.ts(7,3): error TS2322: Type 'string' is not assignable to type 'number'.",
            "Traceback (most recent call last):",
            '  File "/usr/lib/python3/runpy.py", line 196, in _run_module_as_main',
            f'  File "{repo}/src/main.py", line 2, in main',
            "    pass",
            '  File "/usr/lib/python3/json/__init__.py", line 346, in loads',
            "ValueError: bad input",
            "README.md:1: AssertionError: the title",
            "src/main.py:1:1: note: defined here",
        ]
    )
    found = [(d.path, d.line, d.severity, d.message) for d in parse_diagnostics(output, repo)]
    assert found == [
        ("src/users.ts", 12, "error", "cannot find 'userId' in scope"),
        ("src/main.py", 3, "warning", "unused variable 'x'  [unused]"),
        ("src/users.ts", 7, "error", "TS2322: Type 'string' is not assignable to type 'number'."),
        ("src/main.py", 2, "error", "ValueError: bad input"),
        ("src/main.py", 1, "info", "defined here"),
    ]
    context = gather_context(repo, runs=Runs(last_output=output))
    assert str(repo) not in make_event(context).to_json()


def test_a_finished_build_leaves_its_problems_and_a_running_one_its_name(repo: Path) -> None:
    script = "import sys; print('src/main.py:1:1: error: broken'); sys.exit(1)"
    (repo / ".voiceide.toml").write_text(f"build = {json.dumps([sys.executable, '-c', script])}\n")
    workspace = CompanionWorkspace(repo)
    with pytest.raises(Exception, match="failed with exit code 1"):
        asyncio.run(workspace.build({}))
    assert workspace.running_tasks == []
    context = gather_context(repo, runs=Runs(tuple(workspace.running_tasks), workspace.last_output))
    assert [(d.path, d.line, d.message) for d in context.diagnostics] == [("src/main.py", 1, "broken")]


# ---- when it is sent -----------------------------------------------------------------------------


class Sent:
    """A ``send`` that keeps what it was given."""

    def __init__(self) -> None:
        self.payloads: list[WorkspaceContext | WorkspaceNames] = []

    async def __call__(self, payload: WorkspaceContext | WorkspaceNames) -> bool:
        self.payloads.append(payload)
        return True

    @property
    def contexts(self) -> list[WorkspaceContext]:
        return [p for p in self.payloads if isinstance(p, WorkspaceContext)]


async def until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.02)


@async_test
async def test_a_change_is_sent_again_and_nothing_is_sent_while_nothing_changes(repo: Path) -> None:
    sent = Sent()
    workspace = CompanionWorkspace(repo)
    sender = ContextSender(workspace, sent, timing=FAST)
    sender.start()
    try:
        await until(lambda: len(sent.contexts) == 1 and any(isinstance(p, WorkspaceNames) for p in sent.payloads))
        assert sent.contexts[0].changed_files == ()
        await asyncio.sleep(0.5)  # ten looks at an unchanged folder
        assert len(sent.contexts) == 1
        write(repo, "src/users.ts", "export const apiBase = 'x'\n")
        git(repo, "add", "src/users.ts")
        await until(lambda: len(sent.contexts) == 2)
        assert sent.contexts[1].changed_files == ("src/users.ts",)
        workspace.running_tasks.append("build: make")
        await until(lambda: len(sent.contexts) == 3)
        assert sent.contexts[2].running_tasks == ("build: make",)
        sender.resend()  # a new sessionReady: the same context again
        await until(lambda: len(sent.contexts) == 4)
        assert sent.contexts[3] == sent.contexts[2]
    finally:
        await sender.stop()


def companion_for(fake: FakeConductor, root: Path, **kwargs: Any) -> Companion:
    device = companion_device(root, display=False, machine="test-machine")
    return Companion(fake.url, SESSION, root, device=device, backoff=scaled_backoff(0.01), **kwargs)


def kinds_sent(session: FakeSession) -> set[type]:
    return {type(e.payload) for e in workspace_events(session)}


def workspace_events(session: FakeSession) -> list[Event]:
    return [e for _, e in session.received if isinstance(e.payload, WorkspaceContext | WorkspaceNames)]


@async_test
async def test_the_companion_sends_its_context_and_names_after_joining_in_frames_that_fit(repo: Path) -> None:
    async with FakeConductor() as fake, companion_for(fake, repo, follow="src/main.py", context_timing=FAST):
        session = fake.session(SESSION)
        await session.wait_until(lambda: {WorkspaceContext, WorkspaceNames} <= kinds_sent(session), timeout=8)
    kinds = [type(e.payload) for _, e in session.received]
    assert kinds[0] is SessionStart and kinds.index(WorkspaceContext) < kinds.index(WorkspaceNames)
    context = next(e.payload for e in workspace_events(session) if isinstance(e.payload, WorkspaceContext))
    assert context.open_file is not None and context.open_file.path == "src/main.py"
    assert all(len(frame.encode()) <= 32 * 1024 for frame in fake.connections[0].frames if isinstance(frame, str))


@async_test
async def test_a_reconnect_sends_the_context_and_the_names_again(repo: Path) -> None:
    async with FakeConductor() as fake, companion_for(fake, repo, context_timing=FAST) as companion:
        session = fake.session(SESSION)

        def on(connection: int, kind: type) -> bool:
            return any(index == connection and isinstance(e.payload, kind) for index, e in session.received)

        await session.wait_until(lambda: on(0, WorkspaceContext) and on(0, WorkspaceNames), timeout=8)
        await companion.client.drop_connection()
        await session.wait_until(lambda: on(1, WorkspaceContext) and on(1, WorkspaceNames), timeout=8)
    first, again = (
        [e.payload for i, e in session.received if i == n and isinstance(e.payload, WorkspaceContext)] for n in (0, 1)
    )
    assert again[0] == first[-1]  # nothing changed: the same context, sent again on the new connection


@async_test
async def test_a_companion_without_context_sends_neither_context_nor_names(repo: Path) -> None:
    async with FakeConductor() as fake, companion_for(fake, repo, send_context=False, context_timing=FAST) as c:
        session = fake.session(SESSION)
        result = await session.call("editor.readFile", {"path": "README.md"})
        await asyncio.sleep(0.5)  # ten looks, had it been looking
    assert isinstance(result, ToolResult) and result.error is None
    assert c.context is None and workspace_events(session) == []


@async_test
async def test_the_command_line_follows_a_file_and_no_context_sends_nothing(repo: Path, api: StandInApi) -> None:  # noqa: F811
    async def run(*options: str) -> tuple[FakeSession, str]:
        out = io.StringIO()
        async with FakeConductor() as fake:
            argv = [*argv_for(fake, api, repo), *options]
            running = asyncio.create_task(cli.run(argv, stdin=io.StringIO(), stdout=out, stderr=io.StringIO()))
            session = fake.session(SESSION)
            await session.wait_until(lambda: session.connection is not None)
            await session.call("editor.readFile", {"path": "README.md"})
            if "--no-context" in options:
                await asyncio.sleep(0.5)
            else:
                await session.wait_until(lambda: workspace_events(session) != [])
            await session.send(ErrorPayload(code=str(ErrorCode.SESSION_ENDED), message="ended"), seq=False)
            assert session.connection is not None
            await session.connection.ws.close(1000)
            await asyncio.wait_for(running, 5)
        return session, out.getvalue()

    session, shown = await run("--follow", "src/users.ts")
    context = workspace_events(session)[0].payload
    assert isinstance(context, WorkspaceContext) and context.open_file is not None
    assert context.open_file.path == "src/users.ts"
    assert "follows src/users.ts; sends the session this folder's context" in shown
    session, shown = await run("--no-context")
    assert workspace_events(session) == []
    assert "--no-context: the session is sent neither this folder's context nor its names" in shown


def test_a_followed_file_outside_the_workspace_is_refused(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["companion", "--url", "ws://127.0.0.1:9/", "--session", SESSION, "--workspace", str(repo)]
    with pytest.raises(SystemExit) as exited:
        asyncio.run(
            cli.run(
                [*argv, "--follow", "../secrets.txt"], stdin=io.StringIO(), stdout=io.StringIO(), stderr=io.StringIO()
            )
        )
    assert exited.value.code == 2
    assert "--follow: ../secrets.txt is not a file of the workspace" in capsys.readouterr().err
