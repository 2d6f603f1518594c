"""Connecting: the sessionId in the URL, sessionStart first, and a failed first connection."""

from __future__ import annotations

import socket
import uuid

import pytest

from shared.wire.protocol import ErrorCode, Event, SessionStart
from voiceide_client.connection.link import ConductorUnavailable, session_url
from voiceide_client.conversation.client import ConductorClient

from .fake_conductor import FakeConductor, async_test


def unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_session_url_sets_session_id_and_keeps_other_parameters() -> None:
    url = session_url("ws://127.0.0.1:9000/prod?stage=a&sessionId=old", "new-id")
    assert url == "ws://127.0.0.1:9000/prod?stage=a&sessionId=new-id"


@async_test
async def test_generated_session_id_is_a_uuid4_sent_in_url_and_session_start_first() -> None:
    async with FakeConductor() as fake, ConductorClient(fake.url) as client:
        await fake.wait_until(lambda: len(fake.connections) == 1 and fake.connections[0].frames)
        assert uuid.UUID(client.session_id).version == 4
        connection = fake.connections[0]
        assert connection.session_id == client.session_id
        first = connection.outcomes[0]
        assert isinstance(first, Event) and isinstance(first.payload, SessionStart)
        assert first.payload.session_id == client.session_id
        assert first.payload.last_seq is None
        assert client.sent[0] == first


@async_test
async def test_given_session_id_and_resumed_last_seq_are_used() -> None:
    session_id = str(uuid.uuid4())
    async with FakeConductor() as fake, ConductorClient(fake.url, session_id, last_seq=7) as client:
        await fake.wait_until(lambda: bool(fake.connections and fake.connections[0].session_start))
        start = fake.connections[0].session_start
        assert fake.connections[0].session_id == session_id == client.session_id
        assert start is not None and start.session_id == session_id and start.last_seq == 7


@async_test
async def test_first_connection_failure_reports_ws_connect_failed() -> None:
    seen: list[Event] = []
    client = ConductorClient(f"ws://127.0.0.1:{unused_port()}/", on_event=seen.append)
    with pytest.raises(ConductorUnavailable):
        await client.connect()
    assert client.error_codes == [ErrorCode.WS_CONNECT_FAILED]
    assert seen == client.errors
    assert client.connections == 0 and client.reconnect_attempts == 0


@async_test
async def test_connect_waits_for_session_ready_and_keeps_what_it_says() -> None:
    async with FakeConductor() as fake, ConductorClient(fake.url, capabilities=("sentenceSpeech",)) as client:
        assert client.session_ready is not None  # connect() returned only once it arrived
        assert client.session_ready.capabilities == ("sentenceSpeech",) and not client.session_ready.resumed
        turn = await client.say("hello")
        assert turn.completed


@async_test
async def test_a_conductor_that_never_answers_session_start_costs_the_ready_timeout_once() -> None:
    async with FakeConductor() as fake:
        fake.answers_session_start = False
        async with ConductorClient(fake.url, ready_timeout=0.2) as client:
            assert client.session_ready is None
            turn = await client.say("hello")
            assert turn.completed and fake.session(client.session_id).transcripts() == ["hello"]
