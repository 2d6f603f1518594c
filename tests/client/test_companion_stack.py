"""The desktop companion against the whole local stack (API Gateway, the Lambda handlers, DynamoDB,
the offline brain), as the only device of a session: the conductor's model calls the tools it
declared and they run for real over a git repository (a read, an edit said yes to, a background
build named by ``.voiceide.toml``), and a build cut by a restart of the companion, answered by the
next one at once. Here the companion sends the transcripts itself, standing in for the phone; the
offline brain reads tool results back word for word."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from conductor_local.stack import LocalStack
from shared.wire.protocol import AssistantSpeechFinal, SessionStart, ToolResult
from voiceide_client.companion.device import companion_device
from voiceide_client.companion.session import Companion
from voiceide_client.connection.link import scaled_backoff

from .fake_conductor import async_test
from .stack_support import session_started

pytestmark = pytest.mark.e2e

TURN_S = 10.0


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    env = {"CONDUCTOR_TURN_RESERVE_MS": "1000", "CONDUCTOR_LOCAL_READBACK": "literal"}
    with LocalStack(port=0, quiet=True, env=env) as local:
        yield local


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "app"
    root.mkdir()
    (root / "main.py").write_text("x = 1\ny = 2\n")
    script = "print('Compiling main.py'); print('built ok')"
    (root / ".voiceide.toml").write_text(f'build = ["{sys.executable}", "-c", "{script}"]\n')
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


@async_test
async def test_the_companion_runs_the_models_calls_over_a_real_folder(stack: LocalStack, repo: Path) -> None:
    device = companion_device(repo, display=False)
    companion = Companion(stack.ws_url, str(uuid.uuid4()), repo, device=device, backoff=scaled_backoff(0.01))
    async with companion:
        client = companion.client
        await session_started(stack, client)
        start = next(e.payload for e in client.sent if isinstance(e.payload, SessionStart))
        assert start.device == device and start.tools is not None

        read = await client.say('call editor.readFile {"path": "main.py"}', timeout=TURN_S)
        assert read.completed and read.errors == []
        assert json.loads(read.calls("editor.readFile")[0].result or "")["text"] == "x = 1\ny = 2\n"
        assert any("x = 1" in final for final in read.finals)  # what reached the model

        ask = 'call editor.replaceText {"path": "main.py", "startLine": 2, "endLine": 2, "text": "y = 42"}'
        asked = await client.say(ask, timeout=TURN_S)
        assert asked.completed and asked.calls("editor.replaceText") == []  # held for the person's yes
        assert (repo / "main.py").read_text() == "x = 1\ny = 2\n"
        said_yes = await client.say("yes", timeout=TURN_S)
        assert said_yes.completed and (repo / "main.py").read_text() == "x = 1\ny = 42\n"

        before = len(client.events)
        started = await client.say("call build.run {}", timeout=TURN_S)
        assert started.completed
        await client.wait_for(
            lambda e: isinstance(e.payload, AssistantSpeechFinal) and "built ok" in e.payload.text,
            TURN_S,
            since=before,
        )
    (build,) = [call for call in client.tool_calls if call.name == "build.run"]
    assert json.loads(build.result or "")["status"] == "succeeded"
    answered = [e.payload.call_id for e in client.sent if isinstance(e.payload, ToolResult)]
    assert len(answered) == len(set(answered))  # every call answered once


@async_test
async def test_a_build_cut_by_a_restart_is_reported_at_once_not_at_its_deadline(
    stack: LocalStack, tmp_path: Path
) -> None:
    root = tmp_path / "slow"
    root.mkdir()
    runs = root / "runs.txt"
    script = f"import time; open({str(runs)!r}, 'a').write('run '); time.sleep(60)"
    (root / ".voiceide.toml").write_text(f'build = ["{sys.executable}", "-c", "{script}"]\n')
    device, journal, session_id = companion_device(root, display=False), tmp_path / "state", str(uuid.uuid4())

    def companion() -> Companion:
        return Companion(
            stack.ws_url, session_id, root, device=device, journal_folder=journal, backoff=scaled_backoff(0.01),
            kill_grace=0.2,
        )  # fmt: skip

    async with companion() as first:
        await session_started(stack, first.client)
        started = await first.client.say("call build.run {}", timeout=TURN_S)
        assert started.completed  # a background build: the turn ends at once, the build goes on
        async with asyncio.timeout(TURN_S):
            while not (runs.exists() and runs.read_text() == "run "):
                await asyncio.sleep(0.02)
    # stopped mid-build: the conductor waits for its result (until its deadline, 630 s) and does
    # not send it again; the companion started again answers it as soon as it has joined
    async with companion() as again:
        report = await again.client.wait_for(
            lambda e: isinstance(e.payload, AssistantSpeechFinal) and "was not run again" in e.payload.text,
            TURN_S,
        )
    assert "the companion restarted while build.run ran" in report.payload.text
    assert runs.read_text() == "run "  # never run twice
