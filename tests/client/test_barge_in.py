"""Barge-in: the interruption goes to the conductor and the speech in progress stops."""

from __future__ import annotations

import asyncio
import json

from shared.wire.protocol import ErrorCode, ErrorPayload, ToolResult
from voiceide_client.conversation.client import ConductorClient
from voiceide_client.tools.router import ToolRouter
from voiceide_client.voice.speaker import HeldSpeaker

from .fake_conductor import FakeConductor, async_test, standard_turn


@async_test
async def test_barge_in_sends_interruption_and_stops_tts_speak() -> None:
    speaker = HeldSpeaker()
    reply = "Once upon a time there was a very long story"
    async with (
        FakeConductor(standard_turn(reply)) as fake,
        ConductorClient(fake.url, tools=ToolRouter(speaker)) as client,
    ):
        turn = asyncio.create_task(client.say("tell me a story"))
        await asyncio.wait_for(speaker.started.wait(), 5)
        assert speaker.is_playing
        await client.barge_in("user spoke")
        result = await turn
        session = fake.sessions[client.session_id]
        await fake.wait_until(lambda: len(session.results()) == 3)

    assert not speaker.is_playing
    assert speaker.interrupted == [reply] and speaker.spoken == []
    speech = result.calls("tts.speak")[0]
    assert speech.error is None and speech.value == {"spoken": False, "heardText": ""}  # cut before a word
    assert result.completed and result.states == ["thinking", "idle"]

    wire = [e.payload for _, e in session.received if isinstance(e.payload, ErrorPayload | ToolResult)]
    interruption = next(i for i, p in enumerate(wire) if isinstance(p, ErrorPayload))
    speak_result = next(i for i, p in enumerate(wire) if getattr(p, "call_id", None) == speech.call_id)
    assert wire[interruption] == ErrorPayload(
        code=ErrorCode.AUDIO_OUTPUT_INTERRUPTED, message="user spoke", heard_text=""
    )
    assert interruption < speak_result
    assert json.loads(wire[speak_result].result or "") == {"spoken": False, "heardText": ""}


@async_test
async def test_barge_in_with_nothing_playing_only_informs_the_conductor() -> None:
    async with FakeConductor() as fake, ConductorClient(fake.url) as client:
        await client.barge_in()
        session = fake.sessions[client.session_id]
        await fake.wait_until(lambda: bool(session.errors()))
    assert [e.code for e in session.errors()] == [ErrorCode.AUDIO_OUTPUT_INTERRUPTED]
