"""The README's demo: the ``voiceide-client`` command runs examples/demo.txt against the local stack."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conductor_local.bedrock.offline_brain import parse_calls
from conductor_local.stack import LocalStack

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "examples" / "demo.txt"


def script_lines(path: Path) -> list[str]:
    lines = (line.strip() for line in path.read_text(encoding="utf-8").splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def expected_reply(line: str) -> re.Pattern[str]:
    """What the offline brain answers ``line`` with, as printed: a read-back per tool, or ``You said: …``."""
    calls = parse_calls(line)
    if calls is None:
        return re.compile(re.escape(f"You said: {line}"))
    # Each tool either returned something or failed (the CLI's workspace tools decide which).
    said = [rf"{re.escape(name)} (?:returned .+|failed: .+)" for name, _ in calls]
    return re.compile(r"\. ".join(said))


def test_the_demo_script_runs_every_turn_through_the_cli(stack: LocalStack) -> None:
    lines = script_lines(DEMO)
    assert len(lines) >= 3, "the demo has speech and tool calls"
    done = subprocess.run(
        [sys.executable, "-m", "voiceide_client", "--url", stack.ws_url, "--script", str(DEMO), "--timeout", "20"],
        cwd=REPO,  # the demo's IDE tools act on the current folder
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, f"exit {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    printed = done.stdout.splitlines()

    # Each turn, in order: the user's line, thinking, the assistant's answer, idle.
    turns: list[list[str]] = []
    for row in printed:
        if row.startswith("you: "):
            turns.append([])
        if turns:
            turns[-1].append(row)
    assert [turn[0] for turn in turns] == [f"you: {line}" for line in lines]
    for line, turn in zip(lines, turns, strict=True):
        assert turn[1] == "[state] thinking", turn
        assert turn[-1] == "[state] idle", turn
        answers = [row.removeprefix("assistant: ") for row in turn if row.startswith("assistant: ")]
        assert len(answers) == 1, turn
        assert expected_reply(line).fullmatch(answers[0]), f"{line!r} was answered {answers[0]!r}"
        calls = parse_calls(line) or []
        tool_rows = [row for row in turn if row.startswith("→ tool ")]
        assert [row.split()[2] for row in tool_rows] == [name for name, _ in calls]
        for row, (_, arguments) in zip(tool_rows, calls, strict=True):
            assert json.loads(row.split(" ", 3)[3]) == arguments
