"""The ``voiceide-client`` command against the fake conductor, in-process and as a subprocess."""

from __future__ import annotations

import asyncio
import io
import sys
import uuid
from pathlib import Path

import pytest

from shared.wire.protocol import AssistantSpeechPartial, ErrorCode
from voiceide_client.command_line import cli
from voiceide_client.command_line.arguments import EXIT_OK, EXIT_TURN_TIMEOUT, EXIT_UNREACHABLE

from .fake_conductor import FakeConductor, FakeSession, async_test, speak, standard_turn
from .test_connect import unused_port


async def _model_turn(session: FakeSession, text: str) -> None:
    await session.call_nowait("convo.setState", {"state": "thinking"})
    if text.startswith("open"):
        await session.call("editor.openFile", {"path": "README.md"})
    await speak(session, f"You said {text}.")
    await session.call_nowait("convo.setState", {"state": "idle"})


@pytest.fixture(autouse=True)
def no_espeak(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Speech is printed as "🔊 …" whatever is installed on the machine."""
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))


def _script(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "script.txt"
    path.write_text(text, encoding="utf-8")
    return path


@async_test
async def test_script_mode_prints_the_conversation(tmp_path: Path) -> None:
    script = _script(tmp_path, "# a comment\nhello\n\n   \nopen the readme\n")
    (tmp_path / "README.md").write_text("# Demo\n", encoding="utf-8")
    session_id = str(uuid.uuid4())
    out, err = io.StringIO(), io.StringIO()
    async with FakeConductor(_model_turn) as fake:
        argv = ["--url", fake.url, "--session", session_id, "--script", str(script), "--timeout", "5"]
        argv += ["--workspace", str(tmp_path)]
        code = await cli.run(argv, stdout=out, stderr=err)

    assert code == EXIT_OK, err.getvalue()
    assert fake.sessions[session_id].transcripts() == ["hello", "open the readme"]
    lines = out.getvalue().splitlines()
    assert lines[:5] == [
        "you: hello",
        "[state] thinking",
        "assistant: You said hello.",
        "🔊 You said hello.",
        "[state] idle",
    ]
    assert '→ tool editor.openFile {"path": "README.md"}' in lines
    assert '← result editor.openFile {"opened":"README.md","line":1,"lines":1}' in lines
    assert lines[-2:] == ["🔊 You said open the readme.", "[state] idle"]


@async_test
async def test_script_turn_timeout_exits_non_zero(tmp_path: Path) -> None:
    async def silent(session: FakeSession, text: str) -> None:
        await session.call_nowait("convo.setState", {"state": "thinking"})

    err = io.StringIO()
    async with FakeConductor(silent) as fake:
        argv = ["--url", fake.url, "--script", str(_script(tmp_path, "hi\nnever sent\n")), "--timeout", "0.3"]
        code = await cli.run(argv, stdout=io.StringIO(), stderr=err)
    assert code == EXIT_TURN_TIMEOUT
    assert "did not finish within 0.3 s" in err.getvalue()
    assert next(iter(fake.sessions.values())).transcripts() == ["hi"]


@async_test
async def test_unreachable_conductor_exits_non_zero(tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    url = f"ws://127.0.0.1:{unused_port()}/"
    argv = ["--url", url, "--script", str(_script(tmp_path, "hi\n"))]
    assert await cli.run(argv, stdout=out, stderr=err, backoff=[0.01] * 5) == EXIT_UNREACHABLE
    assert out.getvalue() == ""  # said once, on stderr, by the last line
    lines = err.getvalue().splitlines()
    assert len(lines) == 6, lines
    assert lines[1] == (
        f"conductor not reachable at {url}: nothing is listening (connection refused); "
        "is `make run` running? retrying in 0.01 s (2/5)"
    )
    assert lines[-1] == f"voiceide-client: conductor not reachable at {url} after 6 attempts: " + (
        "nothing is listening (connection refused)"
    )


@async_test
async def test_barge_in_after_n_partials(tmp_path: Path) -> None:
    interrupted_early: list[bool] = []

    async def turn(session: FakeSession, text: str) -> None:
        def interrupted() -> bool:
            return any(e.code == ErrorCode.AUDIO_OUTPUT_INTERRUPTED for e in session.errors())

        await session.send(AssistantSpeechPartial(text="One"))
        # a probe call: its result comes after any barge-in the first partial triggered
        await session.call("probe.sync", {})
        interrupted_early.append(interrupted())
        await session.send(AssistantSpeechPartial(text="One two"))
        await session.wait_until(interrupted)
        await session.call_nowait("convo.setState", {"state": "idle"})

    out = io.StringIO()
    async with FakeConductor(turn) as fake:
        argv = ["--url", fake.url, "--script", str(_script(tmp_path, "talk\n")), "--barge-in-after", "2"]
        code = await cli.run(argv, stdout=out, stderr=io.StringIO())
        session = next(iter(fake.sessions.values()))

    assert code == EXIT_OK
    assert interrupted_early == [False]
    assert [e.code for e in session.errors()] == [ErrorCode.AUDIO_OUTPUT_INTERRUPTED]
    assert "[barge-in] cut before a word was heard" in out.getvalue().splitlines()


@async_test
async def test_interactive_mode_reads_transcripts_and_the_barge_in_key() -> None:
    async def turn(session: FakeSession, text: str) -> None:
        await session.call_nowait("convo.setState", {"state": "thinking"})
        if text == "hello":  # the answer is on its way until the user barges in
            await session.wait_until(lambda: bool(session.errors()))
        await speak(session, "Okay.")
        await session.call_nowait("convo.setState", {"state": "idle"})

    stdin = io.StringIO("hello\n!\n\nbye\n")
    out = io.StringIO()
    async with FakeConductor(turn) as fake:
        code = await cli.run(["--url", fake.url, "--quiet"], stdin=stdin, stdout=out, stderr=io.StringIO())
        session = next(iter(fake.sessions.values()))
        await fake.wait_until(lambda: len(session.results()) == 6)

    assert code == EXIT_OK
    assert session.transcripts() == ["hello", "bye"]
    assert [e.code for e in session.errors()] == [ErrorCode.AUDIO_OUTPUT_INTERRUPTED]
    assert out.getvalue() == ""  # --quiet


def test_bad_session_id_is_a_usage_error() -> None:
    with pytest.raises(SystemExit) as caught:
        asyncio.run(cli.run(["--url", "ws://127.0.0.1:1/", "--session", "not-a-uuid"], stderr=io.StringIO()))
    assert caught.value.code == 2


@async_test
async def test_console_entry_point_runs_a_script(tmp_path: Path) -> None:
    script = _script(tmp_path, "hello\n")
    async with FakeConductor(standard_turn("Hello from the fake.")) as fake:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "voiceide_client",
            "--url",
            fake.url,
            "--script",
            str(script),
            "--timeout",
            "5",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            stdin=asyncio.subprocess.DEVNULL,
        )
        stdout, stderr = await asyncio.wait_for(proc.communicate(), 8)

    assert proc.returncode == 0, stderr.decode()
    assert stdout.decode().splitlines() == [
        "you: hello",
        "[state] thinking",
        "assistant: Hello from the fake.",
        "🔊 Hello from the fake.",
        "[state] idle",
    ]
