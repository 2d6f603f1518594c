"""Reconnection as the spec says: backoff 1-2-4-8-16 s, 5 attempts, same sessionId, then offline."""

from __future__ import annotations

import asyncio
from typing import Any

from websockets.exceptions import ConnectionClosedError

from shared.wire.protocol import ErrorCode, UserAudioTranscriptFinal
from voiceide_client.connection.link import DEFAULT_BACKOFF, Link, scaled_backoff
from voiceide_client.connection.local_stub import OFFLINE_REPLY
from voiceide_client.conversation.client import ConductorClient
from voiceide_client.tools.router import ToolRouter
from voiceide_client.voice.speaker import SilentSpeaker

from .fake_conductor import FakeConductor, FakeSession, async_test, speak, standard_turn

FAST = scaled_backoff(0.01)


class RecordingSleep:
    """Stands in for asyncio.sleep: records each delay and returns at once."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)
        await asyncio.sleep(0)


@async_test
async def test_drop_resumes_session_and_pending_result_goes_on_new_connection() -> None:
    tool_started = asyncio.Event()
    release_tool = asyncio.Event()

    async def build(arguments: dict[str, Any]) -> dict[str, bool]:
        tool_started.set()
        await release_tool.wait()
        return {"built": True}

    async def turn(session: FakeSession, text: str) -> None:
        await session.call_nowait("convo.setState", {"state": "thinking"})
        built = await session.call("project.build", {})
        await speak(session, "Build passed." if built.result else "Build failed.")
        await session.call_nowait("convo.setState", {"state": "idle"})

    async with (
        FakeConductor(turn) as fake,
        ConductorClient(fake.url, tools={"project.build": build}, backoff=FAST) as client,
    ):
        say = asyncio.create_task(client.say("build it"))
        await asyncio.wait_for(tool_started.wait(), 5)
        seq_before_drop = client.last_seq
        assert seq_before_drop == 2

        await client.drop_connection()
        await client.wait_connected()
        await fake.wait_until(lambda: len(fake.connections) == 2 and fake.connections[1].session_start is not None)
        release_tool.set()
        result = await say

    first, second = fake.connections
    start = second.session_start
    assert start is not None
    assert second.session_id == first.session_id == client.session_id
    assert start.session_id == client.session_id and start.last_seq == seq_before_drop
    build_call = result.calls("project.build")[0]
    session = fake.sessions[client.session_id]
    delivered_on = [index for index, e in session.received if getattr(e.payload, "call_id", None) == build_call.call_id]
    assert delivered_on == [1]
    assert result.completed and result.final_text == "Build passed."
    assert client.error_codes == [ErrorCode.WS_ERROR]
    assert client.connections == 2 and client.reconnect_attempts == 1


@async_test
async def test_refused_handshakes_back_off_1_2_4_then_resume() -> None:
    sleep = RecordingSleep()
    async with FakeConductor() as fake, ConductorClient(fake.url, sleep=sleep) as client:
        result = await client.say("first")
        fake.refuse_handshakes = 2
        await client.drop_connection()
        await client.wait_connected()
        again = await client.say("second")

    assert sleep.delays == [1.0, 2.0, 4.0]
    assert client.reconnect_attempts == 3 and fake.handshakes == 4
    assert result.completed and again.completed
    assert fake.connections[1].session_start is not None
    assert fake.connections[1].session_start.last_seq == result.events[-1].seq
    assert fake.sessions[client.session_id].transcripts() == ["first", "second"]


@async_test
async def test_exhausted_attempts_report_reconnect_failed_and_the_local_stub_answers() -> None:
    sleep = RecordingSleep()
    seen = []
    speaker = SilentSpeaker()
    async with FakeConductor() as fake:
        client = ConductorClient(fake.url, tools=ToolRouter(speaker), sleep=sleep, on_event=seen.append)
        await client.connect()
        first = await client.say("hello")
        await fake.stop()  # the conductor goes away for good
        await client.wait_until(lambda: client.offline)

    try:
        assert sleep.delays == list(DEFAULT_BACKOFF)
        assert client.reconnect_attempts == 5
        assert client.error_codes == [ErrorCode.WS_ERROR, ErrorCode.RECONNECT_FAILED]
        assert [e.payload.code for e in seen if e in client.errors] == client.error_codes
        assert client.link is Link.OFFLINE

        sent_before = len(client.sent)
        offline = await client.say("open the readme", timeout=2)
        assert offline.completed
        assert offline.final_text == OFFLINE_REPLY
        assert offline.states == ["thinking", "idle"]
        assert offline.calls("tts.speak")[0].value == {"spoken": True}
        assert speaker.spoken == [first.final_text, OFFLINE_REPLY]
        assert len(client.sent) == sent_before  # nothing went to the network
        assert client.stub is not None
        assert isinstance(client.stub.received[0].payload, UserAudioTranscriptFinal)
    finally:
        await client.close()


@async_test
async def test_scaled_backoff_keeps_the_spec_sequence() -> None:
    sleep = RecordingSleep()
    async with FakeConductor() as fake:
        client = ConductorClient(fake.url, backoff=scaled_backoff(0.5), max_attempts=3, sleep=sleep)
        await client.connect()
        await fake.stop()
        await client.wait_until(lambda: client.offline)
        await client.close()
    assert sleep.delays == [0.5, 1.0, 2.0]
    assert client.reconnect_attempts == 3


@async_test
async def test_failed_send_is_reported_and_resent_after_reconnect() -> None:
    async with (
        FakeConductor(standard_turn("Resent fine.")) as fake,
        ConductorClient(fake.url, backoff=FAST) as client,
    ):
        await fake.wait_until(lambda: bool(fake.connections))
        broken = client._ws
        assert broken is not None

        async def failing_send(message: str | bytes) -> None:
            broken.transport.abort()
            raise ConnectionClosedError(None, None)

        broken.send = failing_send  # type: ignore[method-assign]
        result = await client.say("are you there")

    assert client.error_codes[0] == ErrorCode.WS_SEND_FAILED
    assert ErrorCode.WS_ERROR in client.error_codes
    assert result.completed and result.final_text == "Resent fine."
    session = fake.sessions[client.session_id]
    transcripts = [(index, e.id) for index, e in session.received if isinstance(e.payload, UserAudioTranscriptFinal)]
    assert transcripts == [(1, result_transcript_id(client))]


def result_transcript_id(client: ConductorClient) -> Any:
    return next(e.id for e in client.sent if isinstance(e.payload, UserAudioTranscriptFinal))
