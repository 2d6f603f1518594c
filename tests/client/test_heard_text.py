"""heardText: a barge-in, and every tts.speak it cuts short, report the words of the answer the user
actually heard; and a handoff goes in the first sessionStart."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import pytest

from shared.wire.protocol import MAX_HEARD_TEXT, Handoff, HandoffTurn, SessionStart
from voiceide_client.command_line import cli
from voiceide_client.command_line.arguments import EXIT_OK, EXIT_USAGE
from voiceide_client.connection.link import scaled_backoff
from voiceide_client.conversation.client import ConductorClient
from voiceide_client.tools.router import ToolRouter
from voiceide_client.voice.speaker import Playback, PrintSpeaker

from .fake_conductor import FakeConductor, FakeSession, async_test, speak_sentences, standard_turn
from .word_speaker import WordSpeaker

REPLY = "Once upon a time there was a very long story"


def barge_ins(session: FakeSession) -> list[str | None]:
    return [error.heard_text for error in session.errors()]


def speak_values(session: FakeSession) -> list[object]:
    speak_ids = {e.payload.call_id for e in session.sent if e.kind_name == "toolCall" and e.payload.name == "tts.speak"}
    return [json.loads(r.result or "null") for r in session.results() if r.call_id in speak_ids]


def test_a_playback_tells_the_words_heard_as_written() -> None:
    playback = Playback("  You said:  Build the app.")
    assert playback.heard == "" and playback.total_words == 5
    playback.words = 3
    assert playback.heard == "You said:  Build"
    playback.words = 9
    assert playback.heard == "You said:  Build the app."


@async_test
async def test_a_barge_in_after_three_words_reports_those_words() -> None:
    speaker = WordSpeaker()
    async with (
        FakeConductor(standard_turn(REPLY)) as fake,
        ConductorClient(fake.url, tools=ToolRouter(speaker)) as client,
    ):
        turn = asyncio.create_task(client.say("tell me a story"))
        speaker.allow(3)
        await speaker.wait_words(3)
        await client.barge_in("user spoke")
        await turn
        session = fake.sessions[client.session_id]
        await fake.wait_until(lambda: len(speak_values(session)) == 1)

    assert barge_ins(session) == ["Once upon a"]
    assert speak_values(session) == [{"spoken": False, "heardText": "Once upon a"}]
    assert speaker.interrupted == [REPLY]


@async_test
async def test_with_sentence_speech_the_heard_text_spans_the_sentences_played() -> None:
    speaker = WordSpeaker()
    sentences = ["First, the build.", "It passed.", "Two tests fail."]

    async def turn_script(session: FakeSession, text: str) -> None:
        await session.call_nowait("convo.setState", {"state": "thinking"})
        await speak_sentences(session, sentences)
        await session.call_nowait("convo.setState", {"state": "idle"})

    async with FakeConductor(turn_script) as fake, ConductorClient(fake.url, tools=ToolRouter(speaker)) as client:
        turn = asyncio.create_task(client.say("what failed"))
        await client.wait_until(lambda: len(client.tool_calls) == 4)
        speaker.allow(4)  # the first sentence, and "It" of the second
        await speaker.wait_words(4)
        await client.barge_in()
        await turn
        session = fake.sessions[client.session_id]
        await fake.wait_until(lambda: len(speak_values(session)) == 3)

    heard = "First, the build. It"
    assert barge_ins(session) == [heard]
    assert speak_values(session) == [
        {"spoken": True},
        {"spoken": False, "heardText": heard},  # cut short
        {"spoken": False, "heardText": heard},  # dropped before it started
    ]


@async_test
async def test_after_a_tool_the_heard_text_is_that_of_the_answer_that_follows() -> None:
    speaker = WordSpeaker()

    async def turn_script(session: FakeSession, text: str) -> None:
        await session.call_nowait("convo.setState", {"state": "thinking"})
        await session.call("tts.speak", {"text": "Let me look."})
        await session.call("editor.openFile", {"path": "main.swift"})
        await session.call("tts.speak", {"text": "It opens at line one."})
        await session.call_nowait("convo.setState", {"state": "idle"})

    async def open_file(arguments: dict[str, object]) -> dict[str, object]:
        return {"opened": arguments["path"]}

    router = ToolRouter(speaker, {"editor.openFile": open_file})
    async with FakeConductor(turn_script) as fake, ConductorClient(fake.url, tools=router) as client:
        turn = asyncio.create_task(client.say("open main.swift"))
        speaker.allow(3 + 2)  # "Let me look." in full, then two words of the answer after the tool
        await speaker.wait_words(5)
        await client.barge_in()
        await turn
        session = fake.sessions[client.session_id]
        await fake.wait_until(lambda: len(speak_values(session)) == 2)

    assert speaker.spoken == ["Let me look."]
    assert barge_ins(session) == ["It opens"]
    assert speak_values(session) == [{"spoken": True}, {"spoken": False, "heardText": "It opens"}]


@async_test
async def test_a_new_request_starts_a_new_answer_and_the_heard_text_is_capped() -> None:
    async with FakeConductor(standard_turn(REPLY)) as fake, ConductorClient(fake.url) as client:
        await client.say("tell me a story")
        assert client.tools.heard_text == REPLY  # played in full by the silent speaker
        await client.barge_in(heard_text="x" * (MAX_HEARD_TEXT + 10))
        client.tools.new_request()
        assert client.tools.heard_text == ""
        await client.barge_in()
        session = fake.sessions[client.session_id]
        await fake.wait_until(lambda: len(session.errors()) == 2)
    assert [len(text or "") for text in barge_ins(session)] == [MAX_HEARD_TEXT, 0]


@async_test
async def test_printed_speech_at_a_rate_reports_the_words_printed_so_far() -> None:
    out = io.StringIO()
    speaker = PrintSpeaker(out, words_per_minute=60_000)  # a word a millisecond
    playback = Playback("one two three")
    assert await speaker.speak("one two three", playback)
    assert playback.heard == "one two three" and out.getvalue() == "🔊 one two three\n"


# ---- handoff -------------------------------------------------------------------------------------

HANDOFF = {
    "summary": "Fixing the parser tests of the demo app.",
    "recentTurns": [
        {"role": "user", "text": "Why does testEmptyInput fail?"},
        {"role": "assistant", "text": "The parser returns nil for an empty string."},
    ],
}


def session_starts(fake: FakeConductor) -> list[SessionStart]:
    return [connection.session_start for connection in fake.connections if connection.session_start is not None]


@async_test
async def test_a_handoff_goes_in_the_first_session_start_only() -> None:
    async with (
        FakeConductor() as fake,
        ConductorClient(fake.url, handoff=HANDOFF, backoff=scaled_backoff(0.01)) as client,
    ):
        await fake.wait_until(lambda: len(session_starts(fake)) == 1)
        await client.drop_connection()
        await fake.wait_until(lambda: len(session_starts(fake)) == 2)

    first, second = session_starts(fake)
    assert first.handoff == Handoff(
        summary=HANDOFF["summary"],
        recent_turns=[
            HandoffTurn(role="user", text="Why does testEmptyInput fail?"),
            HandoffTurn(role="assistant", text="The parser returns nil for an empty string."),
        ],
    )
    assert json.loads(fake.connections[0].frames[0])["kind"]["sessionStart"]["handoff"] == HANDOFF
    assert second.handoff is None and "handoff" not in json.loads(fake.connections[1].frames[0])["kind"]["sessionStart"]


def test_a_library_handoff_that_breaks_the_limits_is_refused_at_once() -> None:
    with pytest.raises(ValueError, match="recentTurns"):
        ConductorClient("ws://127.0.0.1:1/", handoff={"recentTurns": [{"role": "user", "text": "hi"}] * 9})


@async_test
async def test_the_cli_sends_the_handoff_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    script = tmp_path / "script.txt"
    script.write_text("go on\n", encoding="utf-8")
    handoff = tmp_path / "handoff.json"
    handoff.write_text(json.dumps(HANDOFF), encoding="utf-8")
    out = io.StringIO()
    async with FakeConductor() as fake:
        code = await cli.run(
            ["--url", fake.url, "--script", str(script), "--handoff", str(handoff)], stdout=out, stderr=out
        )
    assert code == EXIT_OK, out.getvalue()
    assert json.loads(fake.connections[0].frames[0])["kind"]["sessionStart"]["handoff"] == HANDOFF


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, "cannot read"),
        ("{not json", "is not JSON"),
        ("[1, 2]", "a handoff is a JSON object"),
        (json.dumps({"recentTurns": [{"role": "robot", "text": "hi"}]}), "recentTurns.0.role"),
        (json.dumps({"summary": "s" * 4001}), "summary"),
        (json.dumps({"recentTurns": [{"role": "user", "text": ""}]}), "recentTurns.0.text"),
    ],
)
def test_a_bad_handoff_file_is_one_error_line_and_exit_code_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, problem: str
) -> None:
    path = tmp_path / "handoff.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(SystemExit) as exited:
        asyncio.run(cli.run(["--url", "ws://127.0.0.1:1/", "--handoff", str(path)]))
    assert exited.value.code == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("voiceide-client: --handoff: ") and problem in err, err
    assert "Traceback" not in err
