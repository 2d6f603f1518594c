"""What each turn cost, as the client sees it: a ``turnUsage`` (sent after the turn's idle) kept on
the turn it describes, and ``--usage`` printing one line a turn."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from shared.wire.protocol import ToolCall, TurnUsage
from voiceide_client.command_line import cli
from voiceide_client.command_line.arguments import EXIT_OK
from voiceide_client.command_line.usage_line import usage_line
from voiceide_client.conversation.client import ConductorClient
from voiceide_client.tools.router import ToolRouter
from voiceide_client.voice.speaker import SilentSpeaker

from .fake_conductor import FakeConductor, FakeSession, async_test, speak


def _usage(turn_id: str, input_tokens: int, output_tokens: int, **extra: object) -> TurnUsage:
    return TurnUsage.model_validate(
        {"turnId": turn_id, "requests": 1, "inputTokens": input_tokens, "outputTokens": output_tokens, **extra}
    )


class LateUsage:
    """A conductor whose ``turnUsage`` of a turn arrives only as the next turn starts (the usage
    comes after the idle, so a client may already have sent its next transcript); the last turn's
    usage follows its idle at once."""

    def __init__(self) -> None:
        self.turns = 0

    async def __call__(self, session: FakeSession, text: str) -> None:
        self.turns += 1
        if self.turns > 1:
            await session.send(_usage(f"turn-{self.turns - 1}", 100 * (self.turns - 1), 10), seq=False)
        await session.call_nowait("convo.setState", {"state": "thinking"})
        await speak(session, f"You said {text}.")
        await session.call_nowait("convo.setState", {"state": "idle"})
        if text == "last":
            await session.send(_usage(f"turn-{self.turns}", 100 * self.turns, 10), seq=False)


@async_test
async def test_a_late_turn_usage_belongs_to_the_turn_that_ended_not_to_the_next() -> None:
    async with (
        FakeConductor(LateUsage()) as fake,
        ConductorClient(fake.url, tools=ToolRouter(SilentSpeaker())) as client,
    ):
        first = await client.say("first")
        assert first.usage is None  # not yet sent
        second = await client.say("last")
        await client.wait_until(lambda: second.usage is not None)

    assert first.usage is not None and first.usage.turn_id == "turn-1" and first.usage.input_tokens == 100
    assert second.usage is not None and second.usage.turn_id == "turn-2" and second.usage.input_tokens == 200
    for turn in (first, second):  # a turn's events run from thinking to idle, the usage never among them
        assert isinstance(turn.events[0].payload, ToolCall) and turn.states == ["thinking", "idle"]
        assert not any(isinstance(event.payload, TurnUsage) for event in turn.events)
    assert [usage.turn_id for usage in client.usages] == ["turn-1", "turn-2"]


@async_test
async def test_a_usage_before_any_turn_ended_is_kept_by_the_client_only() -> None:
    async def early(session: FakeSession, text: str) -> None:
        await session.send(_usage("someone-else", 5, 1), seq=False)
        await session.call_nowait("convo.setState", {"state": "thinking"})
        await speak(session, "Hi.")
        await session.call_nowait("convo.setState", {"state": "idle"})

    async with FakeConductor(early) as fake, ConductorClient(fake.url, tools=ToolRouter(SilentSpeaker())) as client:
        turn = await client.say("hello")

    assert turn.usage is None  # the open turn had not ended: the usage cannot be its own
    assert [usage.turn_id for usage in client.usages] == ["someone-else"]


def test_usage_line_names_tokens_cost_and_timings() -> None:
    usage = _usage(
        "t", 1234, 56, costUsd=0.00123, firstPartialMs=420, firstSpeakMs=510, endMs=1900, pricesAsOf="2026-01-01"
    )
    assert usage_line(usage) == (
        "[usage] 1,234 in / 56 out tokens, ~$0.0012, first partial 420 ms, first speech 510 ms, end 1,900 ms"
    )


def test_usage_line_adds_cache_speculations_and_requests_only_when_there_were_any() -> None:
    usage = _usage(
        "t",
        3000,
        80,
        requests=3,
        cacheReadTokens=2500,
        cacheWriteTokens=12,
        speculationInputTokens=900,
        speculationOutputTokens=7,
        endMs=2500,
    )
    assert usage_line(usage) == (
        "[usage] 3,000 in / 80 out tokens, cache 2,500 read / 12 written, dropped speculations 900 in / 7 out, "
        "3 model requests, end 2,500 ms"
    )


@pytest.fixture
def no_espeak(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))


@pytest.mark.usefixtures("no_espeak")
@pytest.mark.parametrize("flag", [True, False])
def test_cli_usage_prints_one_line_per_turn_after_its_idle(tmp_path: Path, flag: bool) -> None:
    import asyncio

    script = tmp_path / "script.txt"
    script.write_text("first\nlast\n", encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()

    async def run() -> int:
        async with FakeConductor(LateUsage()) as fake:
            argv = ["--url", fake.url, "--script", str(script), "--timeout", "5", *(["--usage"] if flag else [])]
            return await cli.run(argv, stdout=out, stderr=err)

    assert asyncio.run(asyncio.wait_for(run(), 10)) == EXIT_OK, err.getvalue()
    lines = out.getvalue().splitlines()
    usage_lines = [line for line in lines if line.startswith("[usage]")]
    if not flag:
        assert usage_lines == []
        return
    assert usage_lines == [
        "[usage] 100 in / 10 out tokens, end 0 ms",
        "[usage] 200 in / 10 out tokens, end 0 ms",
    ]
    # the last turn's line is printed before the client closes, after that turn's idle
    assert lines.index(usage_lines[1]) > max(i for i, line in enumerate(lines) if line == "[state] idle")
