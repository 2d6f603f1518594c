"""Speculative turns, end to end: the model starts on the person's partial transcript while they
finish speaking, and the app hears nothing of it unless the final transcript confirms it.

The client stub speaks like the app's recognizer (``RecognizerPace``): a partial per word, then the
final after a silence longer than the conductor's stable time (300 ms), so the conductor has a
speculation running when the final comes. Whether one ran is read from what the model was asked
(``brain_requests_for`` the partial's text) or from the session's stored state.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import pytest
from websockets.asyncio.client import connect

from conductor_local.stack import LocalStack
from shared.core.speculation import normalized
from shared.wire.protocol import (
    ErrorCode,
    ErrorPayload,
    Event,
    SessionStart,
    ToolResult,
    UserAudioTranscriptFinal,
    UserAudioTranscriptPartial,
    make_event,
)
from tests.e2e.conftest import (
    TURN_TIMEOUT_S,
    WAIT_S,
    RawApp,
    assert_cumulative,
    assert_seq_counts_up_by_one,
    async_test,
    brain_requests_for,
    caught_up,
    client_for,
    collapse_partials,
    is_partial,
    is_tool_call,
    label,
    poll_until,
    session_store,
    stored_history,
)
from voiceide_client.conversation.client import ConductorClient
from voiceide_client.voice.recognizer import RecognizerPace

pytestmark = pytest.mark.e2e

WORDS_S = 0.1
"""Between two partials: well under the stable time, so only the whole sentence is speculated on.
Three words a sentence keep the partials few (each one is handled by an invocation of its own)."""
SILENCE_S = 0.8
"""From the last partial to the final: the stable time and a generous margin for the watcher to start."""
SPEAKING = RecognizerPace(word_interval_s=WORDS_S, final_after_s=SILENCE_S)


class Heard:
    """``on_event`` hook: every event the app received, with how many finals it had sent by then;
    each also goes to ``shared`` (when given) as ``(who, event)``, for the order across clients."""

    def __init__(self, who: str = "", shared: list[tuple[str, Event]] | None = None) -> None:
        self.client: ConductorClient | None = None
        self.log: list[tuple[Event, int]] = []
        self.who = who
        self.shared = shared

    def __call__(self, event: Event) -> None:
        assert self.client is not None
        finals = sum(isinstance(sent.payload, UserAudioTranscriptFinal) for sent in self.client.sent)
        self.log.append((event, finals))
        if self.shared is not None:
            self.shared.append((self.who, event))

    def before_final(self, number: int = 1) -> list[Event]:
        """The events that arrived before the app sent its ``number``-th final transcript."""
        return [event for event, finals in self.log if finals < number]


def listening_client(stack: LocalStack, heard: Heard | None = None, **kwargs: Any) -> tuple[ConductorClient, Heard]:
    heard = heard or Heard()
    client = client_for(stack, on_event=heard, **kwargs)
    heard.client = client
    return client, heard


async def until_speculating_on(stack: LocalStack, session_id: str, text: str) -> None:
    """Wait until a speculation runs on ``text`` (a slow machine may speculate on a pause between two
    words too: the newer partial drops that one); on a timeout, say what the conductor kept."""
    store = session_store(stack)
    seen: list[tuple[str | None, str | None]] = []

    def speculating() -> bool:
        state = store.load(session_id)
        listening = state.listening if state is not None else None
        turn = state.turn if state is not None else None
        now = (listening.text if listening is not None else None, turn.speculative if turn is not None else None)
        if not seen or seen[-1] != now:
            seen.append(now)
        return turn is not None and turn.speculative == normalized(text)

    try:
        await poll_until(speculating)
    except TimeoutError:
        raise AssertionError(f"no speculation on {text!r}; (heard, speculated on) were {seen}") from None


def no_turn(stack: LocalStack, session_id: str) -> bool:
    state = session_store(stack).load(session_id)
    return state is not None and state.turn is None


def mentioning(events: Sequence[Event], text: str) -> list[Event]:
    """The events whose JSON carries ``text`` (any field: speech, tool arguments, replays)."""
    return [event for event in events if text in event.to_json()]


def timestamp_before(timestamp: str) -> str:
    """A protocol timestamp (UTC, milliseconds, ``Z``) 200 ms before ``timestamp``."""
    earlier = datetime.fromisoformat(timestamp.replace("Z", "+00:00")) - timedelta(milliseconds=200)
    return earlier.strftime("%Y-%m-%dT%H:%M:%S.") + f"{earlier.microsecond // 1000:03d}Z"


def final_sent(client: ConductorClient) -> bool:
    return any(isinstance(event.payload, UserAudioTranscriptFinal) for event in client.sent)


# ---- 1. a confirmed speculation answers sooner --------------------------------------------------


@async_test
async def test_a_matching_final_hears_the_answer_begin_before_the_same_request_without_speculation(
    stack: LocalStack,
) -> None:
    """Two people ask the same thing of a model slow to its first token, their finals sent together:
    the one whose partials let the model start early hears the answer begin first."""
    request = "slow 1.2 ready"  # the model waits 1.2 s before its only word
    arrivals: list[tuple[str, Event]] = []
    speaking = RecognizerPace(word_interval_s=WORDS_S, final_after_s=1.2)
    early, early_heard = listening_client(stack, Heard("early", arrivals))
    plain, _ = listening_client(stack, Heard("plain", arrivals))
    async with early, plain:
        await caught_up(stack, early)
        await caught_up(stack, plain)
        requests_before = brain_requests_for(stack, request)
        speaking_task = asyncio.create_task(early.say(request, timeout=TURN_TIMEOUT_S, speaking=speaking))
        await early.wait_until(lambda: final_sent(early) or speaking_task.done(), TURN_TIMEOUT_S)
        plain_turn = await plain.say(request, timeout=TURN_TIMEOUT_S)  # no partials: nothing to speculate on
        early_turn = await speaking_task

    for turn in (early_turn, plain_turn):
        assert turn.completed and turn.errors == []
        assert turn.final_text == "ready"
        assert turn.states == ["thinking", "idle"]
    order = [(who, label(event)) for who, event in arrivals if is_partial(event)]
    assert ("early", "partial") in order and ("plain", "partial") in order, order
    assert order.index(("early", "partial")) < order.index(("plain", "partial")), order
    # The early answer was the speculation, let out once the final confirmed it: the model was asked
    # once per person, and nothing of it reached the app before the final.
    assert brain_requests_for(stack, request) - requests_before == 2
    assert [label(event) for event in early_heard.before_final()] == ["sessionReady"]


# ---- 2. a differing final gets the answer to the final only -------------------------------------


@async_test
async def test_a_differing_final_gets_exactly_the_answer_to_the_final(stack: LocalStack) -> None:
    partial, final = "run the build", "run the bill"
    client, heard = listening_client(stack)
    async with client:
        await caught_up(stack, client)
        speaking = RecognizerPace(word_interval_s=WORDS_S, final_after_s=SILENCE_S, final_text=final)
        turn = await client.say(partial, timeout=TURN_TIMEOUT_S, speaking=speaking)

    assert brain_requests_for(stack, partial) == 1, "no speculation ran on the partial transcript"
    assert brain_requests_for(stack, final) == 1
    assert turn.completed and turn.errors == []
    assert turn.transcript == final
    assert turn.finals == [f"You said: {final}"]
    assert_cumulative(turn.partials, turn.final_text)  # each partial leads to the final's answer
    (speak,) = turn.calls("tts.speak")
    assert "bill" in speak.arguments and "build" not in speak.arguments
    assert collapse_partials([label(e) for e in turn.events]) == [
        "thinking",
        "partial+",
        "final",
        "tool:tts.speak",
        "idle",
    ]
    assert mentioning(client.events + client.duplicates, "build") == []
    assert [label(event) for event in heard.before_final()] == ["sessionReady"]
    history = stored_history(stack, client.session_id)
    assert [message["role"] for message in history] == ["user", "assistant"]
    assert history[0]["content"] == [{"text": final}]
    assert "build" not in str(history)
    assert_seq_counts_up_by_one(client.events)


# ---- 3. a barge-in drops the speculation --------------------------------------------------------


@async_test
async def test_a_barge_in_during_a_speculation_sends_nothing_of_it(stack: LocalStack) -> None:
    request = "check my calendar"
    client, heard = listening_client(stack)
    store = session_store(stack)
    async with client:
        await caught_up(stack, client)
        speaking = RecognizerPace(word_interval_s=WORDS_S, final_after_s=1.5)
        saying = asyncio.create_task(client.say(request, timeout=TURN_TIMEOUT_S, speaking=speaking))
        await until_speculating_on(stack, client.session_id, request)
        await client.barge_in()
        await poll_until(lambda: no_turn(stack, client.session_id))
        dropped_before_final = not final_sent(client)
        state = store.load(client.session_id)
        turn = await saying
        following = await client.say("thank you", timeout=TURN_TIMEOUT_S)

    barge_ins = [e.payload for e in client.sent if isinstance(e.payload, ErrorPayload)]
    assert [p.code for p in barge_ins] == [ErrorCode.AUDIO_OUTPUT_INTERRUPTED]
    assert dropped_before_final, "the final came before the barge-in dropped the speculation"
    assert state is not None and state.turn is None
    # Nothing reached the app between the barge-in and the final; the final started a turn of its
    # own (the model was asked again), which answered once.
    assert [label(event) for event in heard.before_final()] == ["sessionReady"]
    assert brain_requests_for(stack, request) == 2
    # (The stub holds speech after a barge-in until its next ``say``, so it answers this turn's
    # tts.speak as not played; the next request is spoken as usual.)
    assert turn.completed and turn.errors == []
    assert turn.finals == [f"You said: {request}"]
    assert len(turn.calls("tts.speak")) == 1
    assert len([e for e in client.events if e.kind_name == "assistantSpeechFinal"]) == 2
    assert following.completed and following.errors == []
    assert following.final_text == "You said: thank you"
    assert following.states == ["thinking", "idle"]
    assert_seq_counts_up_by_one(client.events)


# ---- 4. no event of a dropped speculation is ever kept ------------------------------------------


@async_test
async def test_a_dropped_speculation_is_not_in_the_replay_after_a_reconnect(stack: LocalStack) -> None:
    partial, final = "fix the build", "fix the bill"
    async with client_for(stack) as client:
        await caught_up(stack, client)
        speaking = RecognizerPace(word_interval_s=WORDS_S, final_after_s=SILENCE_S, final_text=final)
        turn = await client.say(partial, timeout=TURN_TIMEOUT_S, speaking=speaking)
    assert turn.completed and turn.final_text == f"You said: {final}"
    assert brain_requests_for(stack, partial) == 1, "no speculation ran on the partial transcript"
    kept = [event for event in client.events if event.seq is not None]
    last = max(event.seq for event in kept)

    async with client_for(stack, client.session_id, last_seq=0) as again:
        wanted = {event.seq for event in kept}
        await again.wait_until(lambda: wanted <= {e.seq for e in again.events if e.seq is not None}, WAIT_S)

    replayed = [event for event in again.events if event.seq is not None]
    assert [event.id for event in replayed[: len(kept)]] == [event.id for event in kept]
    assert_seq_counts_up_by_one(again.events)
    assert mentioning(again.events + again.duplicates, "build") == []
    assert mentioning(client.events + client.duplicates, "build") == []
    outbox = session_store(stack).outbox(client.session_id, 0)
    assert [seq for seq, _ in outbox][:last] == list(range(1, last + 1))
    assert [frame for _, frame in outbox if "build" in frame] == []


# ---- 5 and 6. tool calls ------------------------------------------------------------------------


@async_test
async def test_a_speculated_tool_call_is_never_sent_when_the_final_differs(stack: LocalStack) -> None:
    partial = 'call editor.openFile {"path":"a.swift"}'
    final = 'call editor.openFile {"path":"b.swift"}'
    opened: list[dict[str, Any]] = []

    async def open_file(arguments: dict[str, Any]) -> dict[str, Any]:
        opened.append(arguments)
        return {"opened": arguments["path"]}

    client, heard = listening_client(stack, tools={"editor.openFile": open_file})
    async with client:
        await caught_up(stack, client)
        speaking = RecognizerPace(word_interval_s=WORDS_S, final_after_s=SILENCE_S, final_text=final)
        turn = await client.say(partial, timeout=TURN_TIMEOUT_S, speaking=speaking)

    assert brain_requests_for(stack, partial) == 1, "no speculation ran on the partial transcript"
    assert turn.completed and turn.errors == []
    assert opened == [{"path": "b.swift"}]
    calls = [event for event in client.events if is_tool_call(event, "editor.openFile")]
    assert [event.payload.arguments.replace(" ", "") for event in calls] == ['{"path":"b.swift"}']
    assert mentioning(client.events + client.duplicates, "a.swift") == []
    assert [label(event) for event in heard.before_final()] == ["sessionReady"]
    assert client.repeated_calls == []


@async_test
async def test_a_confirmed_speculated_tool_call_runs_once_and_the_turn_completes(stack: LocalStack) -> None:
    request = 'call editor.openFile {"path":"c.swift"}'
    opened: list[dict[str, Any]] = []

    async def open_file(arguments: dict[str, Any]) -> dict[str, Any]:
        opened.append(arguments)
        return {"opened": arguments["path"], "lines": 7}

    client, heard = listening_client(stack, tools={"editor.openFile": open_file})
    async with client:
        await caught_up(stack, client)
        saying = asyncio.create_task(client.say(request, timeout=TURN_TIMEOUT_S, speaking=SPEAKING))
        await until_speculating_on(stack, client.session_id, request)
        speculated_before_final = not final_sent(client)
        turn = await saying

    assert speculated_before_final, "the final came before the speculation started"
    # The model was asked once: the final took the speculation over instead of asking again.
    assert brain_requests_for(stack, request) == 1
    assert turn.completed and turn.errors == []
    assert opened == [{"path": "c.swift"}]
    (call,) = turn.calls("editor.openFile")
    assert call.value == {"opened": "c.swift", "lines": 7}
    assert client.repeated_calls == [] and client.duplicates == []
    assert turn.final_text == 'editor.openFile returned {"opened":"c.swift","lines":7}'
    assert collapse_partials([label(e) for e in turn.events]) == [
        "thinking",
        "tool:editor.openFile",
        "partial+",
        "final",
        "tool:tts.speak",
        "idle",
    ]
    assert [label(event) for event in heard.before_final()] == ["sessionReady"]
    assert_seq_counts_up_by_one(client.events)
    history = stored_history(stack, client.session_id)
    said = [block["text"] for m in history if m["role"] == "user" for block in m["content"] if "text" in block]
    assert said == [request]


# ---- partials delivered out of order -------------------------------------------------------------


@async_test
async def test_a_partial_delivered_after_a_newer_one_does_not_take_its_place(stack: LocalStack) -> None:
    """Each frame is handled by an invocation of its own, so the app's partials may be handled in
    another order than it sent them: one it made earlier (its timestamp says so) may come last.
    The newer words are still the ones answered, and the final that reads as them confirms it."""
    said, older_words = "open the main swift", "open the"
    session_id = str(uuid.uuid4())
    made_before = make_event(UserAudioTranscriptPartial(text=older_words))
    made_before = made_before.model_copy(update={"timestamp": timestamp_before(made_before.timestamp)})
    latest = make_event(UserAudioTranscriptPartial(text=said))
    store = session_store(stack)

    def kept_text() -> str | None:
        state = store.load(session_id)
        return None if state is None or state.listening is None else state.listening.text

    def speculated() -> str | None:
        state = store.load(session_id)
        return None if state is None or state.turn is None else state.turn.speculative

    async with connect(stack.session_url(session_id)) as ws:
        app = RawApp(ws)
        await app.send(SessionStart(session_id=session_id))
        await app.read_until(lambda e: e.kind_name == "sessionReady")
        await ws.send(latest.to_json())
        await poll_until(lambda: kept_text() == said)
        await ws.send(made_before.to_json())  # handled after the newer one
        await poll_until(lambda: speculated() is not None)
        speculated_on = speculated()
        await app.send(UserAudioTranscriptFinal(text=said))
        speak = await app.read_until(lambda e: is_tool_call(e, "tts.speak"))
        await app.send(ToolResult(call_id=speak.payload.call_id, result='{"spoken":true}', error=None))
        await app.read_until(lambda e: e.kind_name == "toolCall" and label(e) == "idle")

    assert brain_requests_for(stack, older_words) == 0, f"the model was started on {older_words!r}"
    assert speculated_on == normalized(said)
    assert brain_requests_for(stack, said) == 1, "the final did not take over the speculation"
    assert [e.payload.text for e in app.events if e.kind_name == "assistantSpeechFinal"] == [f"You said: {said}"]
