"""``--usage``: a turn's line comes before the next request goes out, as long as the conductor sends
its ``turnUsage`` soon after the turn's idle; one that sends none does not hold the next line."""

from __future__ import annotations

import asyncio
import contextlib
import io
from pathlib import Path

import pytest

from shared.wire.protocol import TurnUsage
from voiceide_client.command_line import cli
from voiceide_client.command_line.arguments import EXIT_OK

from .fake_conductor import FakeConductor, FakeSession, async_test, speak


@pytest.fixture(autouse=True)
def no_espeak(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))


def _usage(number: int) -> TurnUsage:
    return TurnUsage.model_validate({"turnId": f"turn-{number}", "requests": 1, "inputTokens": 100 * number})


class UsageAfterIdle:
    """Sends each turn's usage a moment after its idle: at once when the client's next transcript
    arrives first (a client that did not wait), else after ``pause`` seconds."""

    def __init__(self, *, send_usage: bool = True, pause: float = 0.3) -> None:
        self.turns = 0
        self.send_usage = send_usage
        self.pause = pause

    async def __call__(self, session: FakeSession, text: str) -> None:
        self.turns += 1
        number = self.turns
        await session.call_nowait("convo.setState", {"state": "thinking"})
        await speak(session, f"You said {text}.")
        await session.call_nowait("convo.setState", {"state": "idle"})
        if not self.send_usage:
            return
        said = len(session.transcripts())
        with contextlib.suppress(TimeoutError):
            await session.wait_until(lambda: len(session.transcripts()) > said, self.pause)
        await session.send(_usage(number), seq=False)


@pytest.mark.parametrize("piped", [False, True])
@async_test
async def test_each_usage_line_comes_before_the_next_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, piped: bool
) -> None:
    monkeypatch.setattr(cli, "USAGE_GRACE_S", 8.0)  # the conductor's usage always comes within it here
    script = tmp_path / "script.txt"
    script.write_text("first\nsecond\nthird\n", encoding="utf-8")
    out = io.StringIO()
    async with FakeConductor(UsageAfterIdle()) as fake:
        argv = ["--url", fake.url, "--usage", "--timeout", "20"]
        if piped:
            code = await cli.run(argv, stdin=io.StringIO(script.read_text()), stdout=out, stderr=io.StringIO())
        else:
            code = await cli.run([*argv, "--script", str(script)], stdout=out, stderr=io.StringIO())

    assert code == EXIT_OK
    lines = [line for line in out.getvalue().splitlines() if line.startswith(("you:", "[usage]"))]
    assert lines == [
        "you: first",
        "[usage] 100 in / 0 out tokens, end 0 ms",
        "you: second",
        "[usage] 200 in / 0 out tokens, end 0 ms",
        "you: third",
        "[usage] 300 in / 0 out tokens, end 0 ms",
    ]


@async_test
async def test_a_conductor_that_sends_no_usage_holds_each_line_at_most_the_grace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli, "USAGE_GRACE_S", 0.05)
    monkeypatch.setattr(cli, "USAGE_WAIT_S", 0.05)
    script = tmp_path / "script.txt"
    script.write_text("first\nsecond\n", encoding="utf-8")
    out = io.StringIO()
    async with FakeConductor(UsageAfterIdle(send_usage=False)) as fake:
        argv = ["--url", fake.url, "--usage", "--script", str(script), "--timeout", "20"]
        code = await asyncio.wait_for(cli.run(argv, stdout=out, stderr=io.StringIO()), 8)
        session = next(iter(fake.sessions.values()))
    assert code == EXIT_OK and session.transcripts() == ["first", "second"]
    assert "[usage]" not in out.getvalue()
