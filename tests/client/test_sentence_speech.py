"""Speech sentence by sentence: the client announces ``sentenceSpeech``, plays the conductor's
tts.speak calls one at a time in order, answers each once played, drops what is queued on a
barge-in, and shows every answer once."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from shared.wire.protocol import (
    EXECUTING_STATE,
    SENTENCE_SPEECH,
    SPEAKING_STATE,
    AssistantSpeechPartial,
    ErrorCode,
    ErrorPayload,
    Event,
    ToolResult,
    make_event,
)
from voiceide_client.command_line import cli
from voiceide_client.command_line.arguments import EXIT_OK
from voiceide_client.command_line.cli import RendererLines
from voiceide_client.conversation.capabilities import DEFAULT_CAPABILITIES
from voiceide_client.conversation.client import ConductorClient
from voiceide_client.rendering.live import LiveTranscriptRenderer
from voiceide_client.tools.router import ToolRouter
from voiceide_client.voice.speaker import PrintSpeaker, Speaker

from .fake_conductor import (
    Changes,
    FakeConductor,
    FakeSession,
    async_test,
    sentence_turn,
    speak_sentences,
)
from .terminal import Screen

SENTENCES = ["First, the build.", "It passed.", "Two tests fail in the parser."]
ANSWER = " ".join(SENTENCES)
WIDE = 120  # the answer fits on one row


class StepSpeaker(Speaker):
    """Each text plays until the test releases it (or every text, after ``release_all``)."""

    def __init__(self) -> None:
        super().__init__()
        self.started: list[str] = []
        self.playing_now = 0
        self.most_at_once = 0
        self.changes = Changes()
        self._released: set[str] = set()
        self._all = False

    def release(self, text: str) -> None:
        self._released.add(text)
        self.changes.notify()

    def release_all(self) -> None:
        self._all = True
        self.changes.notify()

    async def _play(self, text: str) -> None:
        self.started.append(text)
        self.playing_now += 1
        self.most_at_once = max(self.most_at_once, self.playing_now)
        self.changes.notify()
        try:
            await self.changes.wait_until(lambda: self._all or text in self._released)
        finally:
            self.playing_now -= 1


def speak_results(session: FakeSession, call_ids: set[str] | None = None) -> list[ToolResult]:
    """The results the conductor received for its tts.speak calls, in arrival order."""
    speak_ids = {e.payload.call_id for e in session.sent if e.kind_name == "toolCall" and e.payload.name == "tts.speak"}
    return [result for result in session.results() if result.call_id in (call_ids or speak_ids)]


def speak_call_ids(session: FakeSession) -> list[str]:
    return [e.payload.call_id for e in session.sent if e.kind_name == "toolCall" and e.payload.name == "tts.speak"]


# ---- the capability --------------------------------------------------------------------------


@async_test
async def test_sentence_speech_is_announced_in_every_session_start_by_default() -> None:
    async with FakeConductor() as fake, ConductorClient(fake.url, backoff=[0.01]) as client:
        await fake.wait_until(lambda: fake.connections and fake.connections[0].session_start is not None)
        await client.drop_connection()
        await fake.wait_until(lambda: len(fake.connections) == 2 and fake.connections[1].session_start is not None)

    for connection in fake.connections:
        frame = json.loads(connection.frames[0])
        assert frame["kind"]["sessionStart"]["capabilities"] == [SENTENCE_SPEECH, SPEAKING_STATE, EXECUTING_STATE]
    assert client.capabilities == DEFAULT_CAPABILITIES


@async_test
async def test_a_client_without_capabilities_leaves_the_field_out() -> None:
    async with FakeConductor() as fake, ConductorClient(fake.url, capabilities=()) as client:
        await fake.wait_until(lambda: fake.connections and fake.connections[0].session_start is not None)
        assert fake.sessions[client.session_id].capabilities == ()
    assert "capabilities" not in json.loads(fake.connections[0].frames[0])["kind"]["sessionStart"]


def test_capabilities_a_session_start_cannot_carry_are_refused_at_once() -> None:
    for bad in (["x" * 65], [""], [f"c{index}" for index in range(17)], "sentenceSpeech"):
        with pytest.raises(ValueError, match="capabilities"):
            ConductorClient("ws://127.0.0.1:1/", capabilities=bad)
    client = ConductorClient("ws://127.0.0.1:1/", capabilities=["a", "b", "a"])
    assert client.capabilities == ("a", "b")


@async_test
async def test_the_cli_announces_sentence_speech_unless_told_not_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    script = tmp_path / "script.txt"
    script.write_text("what failed\n", encoding="utf-8")
    announced: dict[str, tuple[str, ...]] = {}
    async with FakeConductor(sentence_turn(SENTENCES)) as fake:
        for flags in ([], ["--no-sentence-speech"]):
            out = io.StringIO()
            code = await cli.run(["--url", fake.url, "--script", str(script), *flags], stdout=out, stderr=out)
            assert code == EXIT_OK, out.getvalue()
            session = fake.sessions[list(fake.sessions)[-1]]
            announced[" ".join(flags)] = session.capabilities
    assert announced == {
        "": (SENTENCE_SPEECH, SPEAKING_STATE, EXECUTING_STATE),
        "--no-sentence-speech": (SPEAKING_STATE, EXECUTING_STATE),
    }


# ---- playback in order -----------------------------------------------------------------------


@async_test
async def test_several_speak_calls_play_one_at_a_time_in_order_and_each_is_answered_when_played() -> None:
    speaker = StepSpeaker()
    async with (
        FakeConductor(sentence_turn(SENTENCES)) as fake,
        ConductorClient(fake.url, tools=ToolRouter(speaker)) as client,
    ):
        turn = asyncio.create_task(client.say("what failed"))
        await client.wait_until(lambda: len(client.tool_calls) == 4)  # thinking and the three speaks
        session = fake.sessions[client.session_id]
        for index, sentence in enumerate(SENTENCES):
            await speaker.changes.wait_until(lambda index=index: speaker.started == SENTENCES[: index + 1])
            assert speaker.playing_now == 1
            assert len(speak_results(session)) == index  # this one is not answered before it is played
            speaker.release(sentence)
            await fake.wait_until(lambda index=index: len(speak_results(session)) == index + 1)
        result = await turn

    assert speaker.spoken == SENTENCES and speaker.most_at_once == 1
    assert [r.call_id for r in speak_results(session)] == speak_call_ids(session)
    assert all(json.loads(r.result or "") == {"spoken": True} and r.error is None for r in speak_results(session))
    assert [call.args["text"] for call in result.calls("tts.speak")] == SENTENCES
    assert result.completed and result.final_text == ANSWER and result.states == ["thinking", "idle"]


@async_test
async def test_a_barge_in_cuts_the_sentence_playing_and_drops_the_queued_ones() -> None:
    speaker = StepSpeaker()
    outcomes: list[list[ToolResult]] = []

    async def turn_script(session: FakeSession, text: str) -> None:
        await session.call_nowait("convo.setState", {"state": "thinking"})
        if text == "what failed":
            outcomes.append(await speak_sentences(session, SENTENCES))
        else:
            outcomes.append(await speak_sentences(session, ["Sure.", "Here it is."]))
        await session.call_nowait("convo.setState", {"state": "idle"})

    async with (
        FakeConductor(turn_script) as fake,
        ConductorClient(fake.url, tools=ToolRouter(speaker)) as client,
    ):
        turn = asyncio.create_task(client.say("what failed"))
        await client.wait_until(lambda: len(client.tool_calls) == 4)
        await speaker.changes.wait_until(lambda: speaker.started == SENTENCES[:1])
        await client.barge_in("user spoke")
        interrupted = await turn
        session = fake.sessions[client.session_id]

        # A speak the conductor sent before it heard the barge-in arrives late: not played.
        late = await session.call("tts.speak", {"text": "And one more thing."})

        speaker.release_all()
        following = await client.say("show me the parser test")

    assert speaker.started == [SENTENCES[0], "Sure.", "Here it is."]
    assert speaker.interrupted == SENTENCES[:1]
    assert sorted(speaker.dropped) == sorted([*SENTENCES[1:], "And one more thing."])  # never started
    # Nothing of the answer was heard: the first sentence was cut before its first word ended.
    not_heard = {"spoken": False, "heardText": ""}
    assert late.error is None and json.loads(late.result or "") == not_heard
    assert [json.loads(r.result or "") for r in outcomes[0]] == [not_heard] * 3
    assert interrupted.completed and interrupted.states == ["thinking", "idle"]

    # The conductor hears the interruption before any speak result of the interrupted turn.
    wire = [e.payload for _, e in session.received if isinstance(e.payload, ErrorPayload | ToolResult)]
    interruption = wire.index(
        ErrorPayload(code=ErrorCode.AUDIO_OUTPUT_INTERRUPTED, message="user spoke", heard_text="")
    )
    first_turn_speaks = {r.call_id for r in outcomes[0]}
    assert all(
        index > interruption
        for index, payload in enumerate(wire)
        if isinstance(payload, ToolResult) and payload.call_id in first_turn_speaks
    )

    # The next request is spoken again, in full.
    assert [json.loads(r.result or "") for r in outcomes[1]] == [{"spoken": True}] * 2
    assert following.completed and speaker.spoken == ["Sure.", "Here it is."]


# ---- what is shown ---------------------------------------------------------------------------


@async_test
async def test_the_transcript_shows_each_answer_once_and_each_sentence_is_spoken_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))  # speech printed as "🔊 …"
    script = tmp_path / "script.txt"
    script.write_text("what failed\n", encoding="utf-8")
    outputs: dict[bool, list[str]] = {}
    async with FakeConductor(sentence_turn(SENTENCES)) as fake:
        for sentence_speech in (True, False):
            out = io.StringIO()
            flags = [] if sentence_speech else ["--no-sentence-speech"]
            code = await cli.run(["--url", fake.url, "--script", str(script), *flags], stdout=out, stderr=out)
            assert code == EXIT_OK, out.getvalue()
            outputs[sentence_speech] = out.getvalue().splitlines()

    for sentence_speech, lines in outputs.items():
        assert [line for line in lines if line.startswith("assistant:")] == [f"assistant: {ANSWER}"]
        spoken = [line.removeprefix("🔊 ") for line in lines if line.startswith("🔊")]
        assert spoken == (SENTENCES if sentence_speech else [ANSWER])
        for sentence in SENTENCES:  # once as the answer, once as speech: nowhere else
            assert sum(line.count(sentence) for line in lines) == 2, lines
        assert lines[0] == "you: what failed" and lines[-1] == "[state] idle"


@async_test
async def test_the_live_display_shows_unnumbered_partials_and_each_answer_once() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=WIDE, color_system=None, markup=False, emoji=False)
    renderer = LiveTranscriptRenderer(console)
    speaker = PrintSpeaker(RendererLines(renderer))
    shown: list[str] = []
    partial_seen = asyncio.Event()

    async def turn_script(session: FakeSession, text: str) -> None:
        await session.call_nowait("convo.setState", {"state": "thinking"})
        partial = make_event(AssistantSpeechPartial(text=SENTENCES[0]))  # unnumbered
        await session.send_event(partial)
        await session.send_event(partial)  # the same event again: one partial for the client
        await partial_seen.wait()
        await speak_sentences(session, SENTENCES)
        await session.call_nowait("convo.setState", {"state": "idle"})

    def on_event(event: Event) -> None:
        if isinstance(event.payload, AssistantSpeechPartial) and not shown:
            screen = Screen(WIDE)
            screen.feed(out.getvalue())
            shown.extend(screen.lines)
            partial_seen.set()

    async with (
        FakeConductor(turn_script) as fake,
        ConductorClient(fake.url, tools=ToolRouter(speaker), renderer=renderer, on_event=on_event) as client,
    ):
        turn = await client.say("what failed")
    renderer.close()

    assert shown[-1] == f"assistant: {SENTENCES[0]}"  # the partial, drawn live
    assert len(client.duplicates) == 1 and turn.partials[0] == SENTENCES[0]
    assert client.last_seq == len([e for e in client.events if e.seq is not None])  # partials left it alone
    screen = Screen(WIDE)
    screen.feed(out.getvalue())
    lines = screen.lines
    assert [line for line in lines if line.startswith("assistant:")] == [f"assistant: {ANSWER}"]
    assert [line for line in lines if line.startswith("🔊")] == [f"🔊 {sentence}" for sentence in SENTENCES]
    assert lines[-1] == "[state] idle"
