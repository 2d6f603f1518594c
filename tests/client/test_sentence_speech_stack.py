"""Speech sentence by sentence against the whole local stack (API Gateway, Lambda handlers,
DynamoDB, the offline brain), over real WebSockets: the client's side of the flow end to end."""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Iterator

import pytest

from conductor_local.stack import LocalStack
from shared.wire.protocol import SENTENCE_SPEECH, AssistantSpeechFinal, ErrorPayload, Event, ToolCall, ToolResult
from voiceide_client.command_line.cli import RendererLines
from voiceide_client.conversation.client import ConductorClient
from voiceide_client.conversation.turn import TurnResult
from voiceide_client.rendering.transcript import TranscriptRenderer
from voiceide_client.tools.router import ToolRouter
from voiceide_client.voice.speaker import PrintSpeaker, SilentSpeaker

from .fake_conductor import async_test
from .stack_support import session_started

pytestmark = pytest.mark.e2e

# The offline brain answers "You said: <transcript>", one word per model delta: three sentences.
TRANSCRIPT = "Build the app. Then run the tests. Tell me what failed."
ANSWER = f"You said: {TRANSCRIPT}"


class Wire:
    """Every event the client received or sent, in the order it did so (a renderer)."""

    def __init__(self) -> None:
        self.log: list[tuple[str, Event]] = []

    def received(self, event: Event) -> None:
        self.log.append(("in", event))

    def sent(self, event: Event) -> None:
        self.log.append(("out", event))

    def client_error(self, error: ErrorPayload) -> None:
        pass

    def state(self, state: str) -> None:
        pass


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    with LocalStack(port=0, quiet=True, env={"CONDUCTOR_TURN_RESERVE_MS": "1000"}) as local:
        yield local


async def _turn(stack: LocalStack, capabilities: tuple[str, ...]) -> tuple[TurnResult, SilentSpeaker, Wire]:
    speaker, wire = SilentSpeaker(), Wire()
    client = ConductorClient(
        stack.ws_url, str(uuid.uuid4()), ToolRouter(speaker), renderer=wire, capabilities=capabilities
    )
    async with client:
        await session_started(stack, client)  # its capabilities apply from the first turn on
        turn = await client.say(TRANSCRIPT, timeout=20)
    return turn, speaker, wire


def _speak_texts(turn: TurnResult) -> list[str]:
    return [call.args["text"] for call in turn.calls("tts.speak")]


@async_test
async def test_a_sentence_speech_client_hears_the_first_sentence_before_the_final(stack: LocalStack) -> None:
    turn, speaker, wire = await _turn(stack, (SENTENCE_SPEECH,))

    assert turn.completed and turn.errors == [] and turn.final_text == ANSWER
    kinds = [
        "final" if isinstance(e.payload, AssistantSpeechFinal) else e.payload.name
        for e in turn.events
        if isinstance(e.payload, AssistantSpeechFinal | ToolCall)
    ]
    assert kinds.index("tts.speak") < kinds.index("final"), kinds  # speech started while the model wrote
    texts = _speak_texts(turn)
    assert len(texts) >= 2 and texts[0].startswith("You said: Build the app.")
    assert " ".join(texts) == ANSWER  # each piece once, in order, nothing left out
    assert speaker.spoken == texts
    assert all(call.value == {"spoken": True} for call in turn.calls("tts.speak"))

    # idle came only after the result of the last tts.speak.
    last_speak = turn.calls("tts.speak")[-1].call_id
    answered = next(
        index
        for index, (way, e) in enumerate(wire.log)
        if way == "out" and isinstance(e.payload, ToolResult) and e.payload.call_id == last_speak
    )
    idle = next(
        index
        for index, (way, e) in enumerate(wire.log)
        if way == "in"
        and isinstance(e.payload, ToolCall)
        and e.payload.name == "convo.setState"
        and json.loads(e.payload.arguments) == {"state": "idle"}
    )
    assert answered < idle


@async_test
async def test_without_the_capability_the_answer_is_spoken_once_after_its_final(stack: LocalStack) -> None:
    turn, speaker, _ = await _turn(stack, ())

    assert turn.completed and turn.final_text == ANSWER
    assert _speak_texts(turn) == [ANSWER] and speaker.spoken == [ANSWER]
    final = next(i for i, e in enumerate(turn.events) if isinstance(e.payload, AssistantSpeechFinal))
    speak = next(
        i for i, e in enumerate(turn.events) if isinstance(e.payload, ToolCall) and e.payload.name == "tts.speak"
    )
    assert final < speak


CODE_TRANSCRIPT = "Change the guard. Use this:\n```swift\nguard let input else { return nil }\n```\nThen run the tests."


@async_test
async def test_code_in_an_answer_is_printed_once_on_its_card_and_never_spoken(stack: LocalStack) -> None:
    out = io.StringIO()
    renderer = TranscriptRenderer(out)
    client = ConductorClient(
        stack.ws_url, str(uuid.uuid4()), ToolRouter(PrintSpeaker(RendererLines(renderer))), renderer=renderer
    )
    async with client:
        await session_started(stack, client)
        turn = await client.say(CODE_TRANSCRIPT, timeout=20)

    assert turn.completed and turn.errors == []
    printed = out.getvalue().splitlines()
    lines = printed[printed.index("[state] thinking") :]  # what came back ("you: …" holds the transcript)
    assert sum("guard let input" in line for line in lines) == 1, lines  # the card's body, once
    card = lines.index("[card] Swift code")
    assert lines[card + 1] == "    guard let input else { return nil }"
    assert card < lines.index("assistant: You said: Change the guard. Use this:")  # the card before the final
    assert "[code: Swift code]" in lines  # the final's placeholder
    spoken = " ".join(line.removeprefix("🔊 ") for line in lines if line.startswith("🔊"))
    assert "on screen" in spoken and "guard" in spoken.split("on screen")[0]  # "Change the guard.", the pointer
    assert "return nil" not in spoken
