"""The build and test commands a workspace's ``.voiceide.toml`` names: the file's rules, nothing run
that it does not name, a time limit that kills the command's whole process group, progress while
it runs, and cancelling."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import pytest

from shared.wire.protocol import ToolCall
from voiceide_client.companion.calls import CompanionRouter
from voiceide_client.companion.command import run_command
from voiceide_client.companion.project_file import ProjectFileError, load_project_file
from voiceide_client.companion.workspace import CompanionWorkspace
from voiceide_client.tools.router import ToolError

from .fake_conductor import async_test

PY = sys.executable


def toml(root: Path, text: str) -> None:
    (root / ".voiceide.toml").write_text(text)


def pid_alive(pid: int) -> bool:
    """Whether the process runs (a zombie waiting for a parent that never reaps it has stopped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state not in ("Z", "X")


def gone(pid: int) -> bool:
    """Whether the process stops within a second (a killed process takes a moment to go)."""
    for _ in range(50):
        if not pid_alive(pid):
            return True
        time.sleep(0.02)
    return False


def test_the_project_file_names_commands_and_a_time_limit(tmp_path: Path) -> None:
    assert load_project_file(tmp_path) is None
    toml(tmp_path, 'build = "swift build -c \'release mode\'"\ntest = ["swift", "test"]\ntimeout_seconds = 90\n')
    project = load_project_file(tmp_path)
    assert project is not None
    assert project.command("build") == ("swift", "build", "-c", "release mode")
    assert project.command("test") == ("swift", "test") and project.timeout_seconds == 90.0
    toml(tmp_path, 'build = "make"\n')
    project = load_project_file(tmp_path)
    assert project is not None and project.command("test") is None and project.timeout_seconds == 600.0


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('biuld = "make"\n', "unknown key 'biuld'"),
        ('build = ""\n', "build is empty"),
        ("build = 3\n", 'build must be a command, such as build = "swift build"'),
        ('build = "make \'oops"\n', "cannot be split into words"),
        ('build = "make"\ntimeout_seconds = 0\n', "timeout_seconds must be a number of seconds from 1 to 3540"),
        ('build = "make"\ntimeout_seconds = true\n', "timeout_seconds must be"),
        ("build = [\n", "not valid TOML"),
    ],
)
def test_a_project_file_that_cannot_be_used_says_why(tmp_path: Path, text: str, why: str) -> None:
    toml(tmp_path, text)
    with pytest.raises(ProjectFileError, match=why.replace("(", "\\(").replace(")", "\\)")):
        load_project_file(tmp_path)
    with pytest.raises(ToolError, match=r"\.voiceide\.toml"):
        asyncio.run(CompanionWorkspace(tmp_path).build({}))


def test_a_project_file_linked_from_outside_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "app"
    root.mkdir()
    (tmp_path / "elsewhere.toml").write_text('build = "make"\n')
    (root / ".voiceide.toml").symlink_to(tmp_path / "elsewhere.toml")
    with pytest.raises(ProjectFileError, match="outside the workspace"):
        load_project_file(root)


def test_nothing_runs_without_the_file_or_its_key_and_the_error_says_what_to_write(tmp_path: Path) -> None:
    workspace = CompanionWorkspace(tmp_path)
    with pytest.raises(ToolError) as no_file:
        asyncio.run(workspace.build({"scheme": "rm -rf /"}))
    assert f"runs only what {tmp_path / '.voiceide.toml'} names" in str(no_file.value)
    assert 'build = "swift build"' in str(no_file.value)
    toml(tmp_path, 'build = "make"\n')
    with pytest.raises(ToolError, match='put test = "swift test"'):
        asyncio.run(workspace.tests({}))
    toml(tmp_path, 'test = "no-such-program-voiceide --all"\n')
    with pytest.raises(ToolError, match=r"could not be started.*the test command of \.voiceide\.toml"):
        asyncio.run(workspace.tests({}))


def test_a_build_runs_in_the_workspace_without_a_shell_and_returns_its_output(tmp_path: Path) -> None:
    script = "import os; print('building in', os.getcwd()); print('warning: w1'); print('$HOME && done')"
    toml(tmp_path, f'build = ["{PY}", "-c", "{script}"]\n')
    result = asyncio.run(CompanionWorkspace(tmp_path).build({}))
    assert result["status"] == "succeeded" and result["exitCode"] == 0
    assert result["output"] == f"building in {tmp_path}\nwarning: w1\n$HOME && done"  # no shell expanded it
    assert result["outputLines"] == 3 and result["problems"] == []


def test_a_failing_build_answers_an_error_with_its_problems_and_the_output_tail(tmp_path: Path) -> None:
    script = (
        "import sys; [print('line', n) for n in range(3000)]; print('main.swift:3: error: no such module'); sys.exit(2)"
    )
    toml(tmp_path, f'build = ["{PY}", "-c", "{script}"]\n')
    with pytest.raises(ToolError) as failed:
        asyncio.run(CompanionWorkspace(tmp_path).build({}))
    message = str(failed.value)
    assert message.startswith(f"`{PY} -c ") and "failed with exit code 2 after" in message
    assert "problems:\nmain.swift:3: error: no such module\nlast output:\n" in message
    assert message.endswith("line 2999\nmain.swift:3: error: no such module")
    assert "line 0\n" not in message and len(message) < 17_000  # the tail, not the whole output


def test_a_build_past_its_time_limit_is_killed_with_everything_it_started(tmp_path: Path) -> None:
    child_pid = tmp_path / "child.pid"
    script = (
        "import subprocess, sys, time; "
        f"child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
        f"open({str(child_pid)!r}, 'w').write(str(child.pid)); print('started', flush=True); time.sleep(60)"
    )
    toml(tmp_path, f'build = ["{PY}", "-c", "{script}"]\ntimeout_seconds = 1\n')
    started = time.monotonic()
    with pytest.raises(ToolError) as stopped:
        asyncio.run(CompanionWorkspace(tmp_path, kill_grace=0.5).build({}))
    assert time.monotonic() - started < 10
    assert "was stopped after its time limit of 1 s" in str(stopped.value) and "started" in str(stopped.value)
    assert gone(int(child_pid.read_text()))  # the grandchild too: the whole process group


@async_test
async def test_a_command_that_ignores_sigterm_is_killed_after_the_grace() -> None:
    outcome = await run_command(
        [
            PY,
            "-c",
            "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('x', flush=True); "
            "time.sleep(60)",
        ],
        Path.cwd(),
        timeout=1.0,
        kill_grace=0.3,
    )
    assert outcome.timed_out and outcome.exit_code is None and outcome.tail == "x"


@async_test
async def test_progress_is_sent_while_a_build_runs_with_the_fraction_its_output_shows(tmp_path: Path) -> None:
    script = (
        "import time; [(print(f'[{n}/4] Compiling f{n}.swift', flush=True), time.sleep(0.25)) for n in range(1, 5)]"
    )
    toml(tmp_path, f'build = ["{PY}", "-c", "{script}"]\n')
    sent: list[tuple[str, float | None, str]] = []

    async def send_progress(call_id: str, fraction: float | None, message: str) -> None:
        sent.append((call_id, fraction, message))

    workspace = CompanionWorkspace(tmp_path, send_progress=send_progress, progress_every=0.2)
    router = CompanionRouter(workspace.handlers())
    result = await router.execute(ToolCall(call_id="tooluse_build1", name="build.run", arguments="{}"))
    assert result.error is None and '"status":"succeeded"' in (result.result or "")
    assert len(sent) >= 3 and {call_id for call_id, _, _ in sent} == {"tooluse_build1"}
    fractions = [fraction for _, fraction, _ in sent if fraction is not None]
    assert fractions == sorted(fractions) and fractions[0] >= 0.25 and fractions[-1] <= 1.0
    shown = [message for _, _, message in sent if ": " in message]
    assert shown and all(" s: [" in message and message.endswith(".swift") for message in shown)


@async_test
async def test_cancelling_a_call_kills_its_command(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    script = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    toml(tmp_path, f'test = ["{PY}", "-c", "{script}"]\n')
    router = CompanionRouter(CompanionWorkspace(tmp_path, kill_grace=0.5).handlers())
    running = asyncio.create_task(router.execute(ToolCall(call_id="tooluse_t1", name="tests.run", arguments="{}")))
    while not pid_file.exists() or not pid_file.read_text():
        await asyncio.sleep(0.02)
    assert router.running == ["tooluse_t1"]
    assert router.cancel("tooluse_t1") and not router.cancel("tooluse_unknown")
    with pytest.raises(asyncio.CancelledError):
        await running
    assert gone(int(pid_file.read_text())) and router.running == [] and router.cancelled == ["tooluse_t1"]


@async_test
async def test_the_output_loses_its_colours_and_control_characters() -> None:
    script = "print('\\x1b[1;31merror:\\x1b[0m main.swift:3 bad\\x07'); print('[ 50%] half', end='\\r\\n')"
    outcome = await run_command([PY, "-c", script], Path.cwd(), timeout=10)
    assert outcome.succeeded and outcome.tail == "error: main.swift:3 bad\n[ 50%] half"
    assert outcome.problems == ["error: main.swift:3 bad"] and outcome.lines == 2
