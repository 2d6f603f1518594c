"""The README's several-devices recipe, as a person runs it: the terminal client is the phone, the
desktop companion runs the tools over a git repository, the console in a browser joins to watch,
each started as the README says, over real WebSockets on the local stack. The phone asks for a
build; it runs on the companion, its progress and report reach the phone and the watching console;
the phone hears the answers, the console shows them. Then each is taken over by the same device
started again, and each says so in one line and stops."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from conductor_local.stack import LocalStack
from tests.console.conftest import Console
from tests.console.test_console_devices import finals_shown, join
from voiceide_client.conversation.client import ConductorClient

pytestmark = pytest.mark.browser

BIN = Path(sys.executable).parent
WAIT_S = 30.0
TAKEN_OVER_LINE = "another connection took this session over"
BUILD = """
import sys, time
for step in range(1, 4):
    print(f"[{step}/3] Compiling unit{step}.swift", flush=True)
    time.sleep(2.5)  # the companion says how far it got every 5 s
print("Build complete", flush=True)
"""


@dataclass
class Program:
    """A command of the README run as a person runs it, its output read as it comes."""

    name: str
    process: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)

    @classmethod
    def start(cls, name: str, argv: list[str], env: dict[str, str], cwd: Path) -> Program:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            cwd=cwd,
        )
        program = cls(name, process)
        threading.Thread(target=program._read, daemon=True).start()
        return program

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def say(self, text: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(text + "\n")
        self.process.stdin.flush()

    def wait_for(self, check: Callable[[list[str]], bool], what: str, timeout: float = WAIT_S) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if check(list(self.lines)):
                return
            time.sleep(0.05)
        raise AssertionError(f"{self.name}: never {what}; it printed:\n" + "\n".join(self.lines[-40:]))

    def printed(self, pattern: str) -> bool:
        return any(re.search(pattern, line) for line in self.lines)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "app"
    root.mkdir()
    (root / "main.swift").write_text("let a = 1\nlet b = 2\n")
    (root / "build.py").write_text(BUILD)
    (root / ".voiceide.toml").write_text(f'build = ["{sys.executable}", "build.py"]\n')
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


@pytest.fixture
def programs() -> Iterator[list[Program]]:
    started: list[Program] = []
    yield started
    for program in started:
        program.stop()


def home(tmp_path: Path, name: str) -> dict[str, str]:
    """A person's machine: its own config and state folders (the device ids kept there)."""
    root = tmp_path / name
    return {**os.environ, "XDG_CONFIG_HOME": str(root / "config"), "XDG_STATE_HOME": str(root / "state")}


def test_the_readme_recipe_phone_companion_and_a_watching_console(
    console: Console, stack: LocalStack, workspace: Path, programs: list[Program], tmp_path: Path
) -> None:
    url = stack.ws_url.rstrip("/")
    phone_home, desk_home = home(tmp_path, "phone"), home(tmp_path, "desk")
    # The phone: `voiceide-client --url …`, as the README's recipe says.
    phone = Program.start("phone", [str(BIN / "voiceide-client"), "--url", url], phone_home, tmp_path)
    programs.append(phone)
    phone.say("hello there")
    phone.wait_for(lambda lines: "assistant: You said: hello there" in lines, "answered hello")
    # The companion: `voiceide-client companion --url … --workspace … --latest`.
    companion_argv = [str(BIN / "voiceide-client"), "companion", "--url", url, "--workspace", str(workspace)]
    desk = Program.start("companion", [*companion_argv, "--latest"], desk_home, tmp_path)
    programs.append(desk)
    desk.wait_for(lambda lines: any(line.startswith("ready:") for line in lines), "said ready")
    session = next(m[1] for line in desk.lines if (m := re.search(r"on session ([0-9a-f-]{36})", line)))
    # The console joins to watch from its Sessions panel.
    console.open()
    join(console, session, "watch")
    console.until(lambda: "You said: hello there" in finals_shown(console))
    phone.wait_for(lambda lines: any("joined" in line and "Browser console" in line for line in lines), "saw it")

    phone.say("call build.run {}")
    desk.wait_for(lambda lines: any("build.run" in line for line in lines), "ran the build")
    phone.wait_for(lambda lines: any("The build succeeded" in line for line in lines), "heard the report")
    # the build ran on the companion only; the phone never ran a tool
    assert not phone.printed(r"→ tool build\.run") and not phone.printed("runs build.run")
    # its progress reached the phone and the console
    progressed = re.compile(r"\[build\.run.*Compiling unit\d\.swift")
    phone.wait_for(lambda lines: any(progressed.search(line) for line in lines), "showed the build's progress")
    shown = console.js("return [...document.querySelectorAll('#transcript li.progress')].map(li => li.textContent)")
    assert any("build.run" in line and "Compiling unit" in line for line in shown), shown
    # the phone hears the answers; the console shows them, and never speaks
    assert phone.printed(r"🔊 .*build")
    console.until(lambda: any("The build succeeded" in text for text in finals_shown(console)))
    assert console.js("return __fake.utterances") == []

    # Each device started again takes its own place: the one it replaces says so and stops.
    phone_again = Program.start(
        "phone again", [str(BIN / "voiceide-client"), "--url", url, "--session", session], phone_home, tmp_path
    )
    programs.append(phone_again)
    phone_again.say("hello again")
    phone.wait_for(lambda lines: any(TAKEN_OVER_LINE in line for line in lines), "said it was taken over")
    assert phone.process.wait(WAIT_S) == 5
    assert sum(TAKEN_OVER_LINE in line for line in phone.lines) == 1
    phone_again.wait_for(lambda lines: "assistant: You said: hello again" in lines, "answered on the new phone")

    desk_again = Program.start("companion again", [*companion_argv, "--session", session], desk_home, tmp_path)
    programs.append(desk_again)
    desk.wait_for(lambda lines: any(TAKEN_OVER_LINE in line for line in lines), "said it was taken over")
    assert desk.process.wait(WAIT_S) == 5
    desk_again.wait_for(lambda lines: any(line.startswith("ready:") for line in lines), "said ready")

    # The console's device connecting again from elsewhere (its id, its roles) takes its place too.
    device = console.sent("sessionStart")[-1]["device"]
    again = ConductorClient(stack.ws_url, session_id=session, device=device, capabilities=())
    asyncio.run(_connect_and_close(again))
    console.wait("document.querySelector('#transcript li.taken-over') !== null")
    assert console.js("return document.querySelectorAll('#transcript li.taken-over').length") == 1
    assert not console.js("return voiceConsole.connected")


async def _connect_and_close(client: ConductorClient) -> None:
    await client.connect()
    await client.close()
