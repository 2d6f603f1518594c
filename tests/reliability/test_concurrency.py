"""Races with real threads: concurrent ``$default`` invocations of one session against moto.

Each race runs many iterations on fresh sessions. API Gateway runs each frame in its own Lambda,
so frames of one connection are handled concurrently; every state change is a conditional
write, and a lost race must be decided again on fresh state, never lost or done twice.
Set RELIABILITY_RACE_ITERATIONS to run more (or fewer) iterations.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

import pytest

from conductor_local.bedrock.server import Script, Text, message, tool_call
from lambdas import runtime
from tests.handlers.conftest import Connection, Harness, summarize
from tests.history_check import assert_valid_history
from tests.reliability.conftest import ConflictCounter
from tests.reliability.figures import count
from tests.reliability.support import (
    IDLE,
    OK,
    THINKING,
    EagerApp,
    RoutingResponder,
    answers_tools,
    by_seq,
    errors,
    frame,
    gated,
    last_user_text,
    model_calls,
    non_partial,
    outbox_seqs,
    release_moto_copies,
    run_in_threads,
    seqs,
    tool_calls,
    wait_partials,
)

ITERATIONS = int(os.environ.get("RELIABILITY_RACE_ITERATIONS", "25"))

Route = Callable[[Callable[[dict[str, Any]], Script]], RoutingResponder]


def assert_delivered_once(conductor: Harness, conn: Connection) -> None:
    """Every kept event reached the (live) connection exactly once; seqs are unique."""
    release_moto_copies()  # once per iteration: keeps moto's memory (and the GC's work) bounded
    events = conductor.events(conn)
    assert len(seqs(events)) == len(set(seqs(events))), f"a seq was posted twice: {seqs(events)}"
    assert sorted(seqs(non_partial(events))) == outbox_seqs(conn.session_id)


def user_texts(history: list[dict[str, Any]]) -> list[str]:
    return [block["text"] for msg in history if msg["role"] == "user" for block in msg["content"] if "text" in block]


def report(name: str, iterations: int, conflicts: ConflictCounter | None = None, **outcomes: int) -> None:
    count(f"races: {name}: iterations", iterations)
    for outcome, number in outcomes.items():
        count(f"races: {name}: {outcome}", number)
    details = ", ".join(f"{k}={v}" for k, v in outcomes.items())
    extra = f", {conflicts.conflicts} version conflicts met and retried" if conflicts is not None else ""
    print(f"concurrency: {name}: {iterations} iterations{', ' + details if details else ''}{extra}")


def test_two_tool_results_at_once_resume_the_model_exactly_once(
    conductor: Harness, route: Route, conflicts: ConflictCounter
) -> None:
    def rule(request: dict[str, Any]) -> Script:
        if answers_tools(request):
            return message("Both done.")
        return message(tool_call("editor.openFile", {"path": "a.swift"}), tool_call("project.search", {"q": "x"}))

    bedrock = route(rule)
    for i in range(ITERATIONS):
        tag = f"pair-{i}"
        conn = conductor.connect()
        conductor.say(conn, f"{tag}: open a and search")
        calls = model_calls(conductor.events(conn))
        assert len(calls) == 2
        run_in_threads(
            *(
                (lambda c=conn, call_id=call.payload.call_id, n=n: conductor.answer(c, call_id, f'{{"n":{n}}}'))
                for n, call in enumerate(calls)
            )
        )
        assert len(bedrock.requests_with(tag)) == 2, f"iteration {i}: the model was not resumed exactly once"
        assert errors(conductor.events(conn)) == []
        assert [s for s in conductor.summary(conn) if s[0] == "final"] == [("final", "Both done.")]
        history = conductor.history(conn.session_id)
        assert_valid_history(history)
        results = {
            block["toolResult"]["toolUseId"]: block["toolResult"]["content"][0]["text"]
            for block in history[2]["content"]
        }
        assert len(results) == 2 and sorted(results.values()) == ['{"n":0}', '{"n":1}']
        conductor.finish_turn(conn)
        assert summarize(non_partial(by_seq(conductor.events(conn))))[-1] == IDLE
        assert_delivered_once(conductor, conn)
    report("two toolResults at once", ITERATIONS, conflicts)


def test_an_eager_app_answers_each_call_while_the_stream_that_made_it_is_still_finishing(
    conductor: Harness, route: Route, conflicts: ConflictCounter
) -> None:
    """Every toolCall (setState, speak, the model's) is answered the moment it is posted."""

    def rule(request: dict[str, Any]) -> Script:
        if answers_tools(request):
            return message("All good.")
        return message(
            "Let me check both.",
            tool_call("editor.openFile", {"path": "a.swift"}),
            tool_call("git.status", {}),
        )

    bedrock = route(rule)
    for i in range(ITERATIONS):
        tag = f"eager-{i}"
        conn = conductor.connect()
        app = EagerApp(conductor, conn)
        talking = conductor.send_in_background(conn, "userAudioTranscriptFinal", {"text": f"{tag}: check"})
        events = app.run(until=lambda evs: IDLE in summarize(evs))
        talking.join(30)
        assert not talking.is_alive()
        assert len(bedrock.requests_with(tag)) == 2, f"iteration {i}: the model was not resumed exactly once"
        assert errors(events) == [], f"iteration {i}: {summarize(events)}"
        assert sorted(app.answered) == sorted(e.payload.call_id for e in tool_calls(events))
        assert len(app.answered) == len(set(app.answered)) == 6  # thinking, speak, 2 calls, speak, idle
        history = conductor.history(conn.session_id)
        assert_valid_history(history)
        assert [m["role"] for m in history] == ["user", "assistant", "user", "assistant"]
        assert history[-1]["content"] == [{"text": "All good."}]
        assert runtime.store().load(conn.session_id).turn is None  # type: ignore[union-attr]
        assert_delivered_once(conductor, conn)
    report("toolResult racing its stream (eager app)", ITERATIONS, conflicts)


def test_a_transcript_racing_a_barge_in(conductor: Harness, route: Route, conflicts: ConflictCounter) -> None:
    gates: list[threading.Event] = []

    def rule(request: dict[str, Any]) -> Script:
        if "count" in last_user_text(request):
            gates.append(threading.Event())
            return gated(message(Text("one two three four five six seven")), gates[-1], after_deltas=2)
        return message("Next answer.")

    route(rule)
    won = {"barge-in last": 0, "transcript last": 0}
    for i in range(ITERATIONS):
        conn = conductor.connect()
        counting = conductor.send_in_background(conn, "userAudioTranscriptFinal", {"text": f"count {i}"})
        wait_partials(conductor, conn, 2)
        run_in_threads(lambda c=conn: conductor.barge_in(c), lambda c=conn, i=i: conductor.say(c, f"next {i}"))
        gates[-1].set()
        counting.join(30)
        assert not counting.is_alive()

        history = conductor.history(conn.session_id)
        assert_valid_history(history)
        assert user_texts(history).count(f"count {i}") == 1
        assert user_texts(history).count(f"next {i}") == 1
        assert not any(s == ("final", "one two three four five six seven") for s in conductor.summary(conn))
        assert errors(conductor.events(conn)) == []
        last = summarize(non_partial(by_seq(conductor.events(conn))))[-1]
        state = runtime.store().load(conn.session_id)
        assert state is not None
        if last == IDLE:  # the barge-in came last: nothing in progress
            won["barge-in last"] += 1
            assert state.turn is None
        else:  # the transcript came last: its turn ran and waits for the app to speak it
            won["transcript last"] += 1
            assert last == ("toolCall", "tts.speak", {"text": "Next answer."})
            assert state.turn is not None and state.turn.stream is None
            conductor.finish_turn(conn)
        assert summarize(non_partial(by_seq(conductor.events(conn))))[-1] == IDLE
        assert_delivered_once(conductor, conn)
    report("transcript racing a barge-in", ITERATIONS, conflicts, **won)


def test_two_transcripts_at_once(conductor: Harness, route: Route, conflicts: ConflictCounter) -> None:
    route(lambda request: message(Text("Reply to you.", pause=0.005)))  # streams long enough to overlap
    both_streamed = 0
    for i in range(ITERATIONS):
        conn = conductor.connect()
        run_in_threads(
            lambda c=conn, i=i: conductor.say(c, f"first {i}"), lambda c=conn, i=i: conductor.say(c, f"second {i}")
        )
        summary = conductor.summary(conn)
        assert summary.count(THINKING) == 2  # each transcript started its own turn
        assert errors(conductor.events(conn)) == []
        history = conductor.history(conn.session_id)
        assert_valid_history(history)
        texts = user_texts(history)
        assert texts.count(f"first {i}") == 1 and texts.count(f"second {i}") == 1
        # the later turn always completes: it is spoken and then ends
        assert summarize(non_partial(by_seq(conductor.events(conn))))[-1] == (
            "toolCall",
            "tts.speak",
            {"text": "Reply to you."},
        )
        both_streamed += summary.count(("final", "Reply to you.")) == 2
        conductor.finish_turn(conn)
        assert summarize(non_partial(by_seq(conductor.events(conn))))[-1] == IDLE
        assert runtime.store().load(conn.session_id).turn is None  # type: ignore[union-attr]
        assert_delivered_once(conductor, conn)
    report("two transcripts at once", ITERATIONS, conflicts, **{"both turns streamed to the end": both_streamed})


def test_the_same_frame_delivered_twice_at_once_is_processed_once(
    conductor: Harness, route: Route, conflicts: ConflictCounter
) -> None:
    bedrock = route(lambda request: message("Only once."))
    for i in range(ITERATIONS):
        tag = f"twice-{i}"
        conn = conductor.connect()
        body = frame("userAudioTranscriptFinal", {"text": tag})
        deliver = lambda c=conn, b=body: conductor.send_raw(c, b)  # noqa: E731
        assert run_in_threads(deliver, deliver) == [OK, OK]
        assert conductor.summary(conn).count(THINKING) == 1
        assert len(bedrock.requests_with(tag)) == 1
        assert user_texts(conductor.history(conn.session_id)) == [tag]
        assert_delivered_once(conductor, conn)
    report("the same frame twice at once", ITERATIONS, conflicts)


def test_a_reconnect_s_session_start_racing_the_turn_it_missed(
    conductor: Harness, route: Route, conflicts: ConflictCounter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The app's network drops mid-turn, after "Opening it." was said (and kept, unheard). Its new
    connection's sessionStart(lastSeq) then races the rest of the turn, the model's toolCall.
    Whatever the interleaving, the new connection hears what it missed and everything later
    exactly once, in seq order: nothing goes live to it before its catch-up is through.
    """
    gates: dict[int, tuple[threading.Event, threading.Event]] = {}

    def rule(request: dict[str, Any]) -> Script:
        if answers_tools(request):
            return message("Done.")
        i = int(last_user_text(request).rsplit(" ", 1)[-1])
        use = tool_call("editor.openFile", {"path": "a"}, pause=0.003 * (i % 4))  # vary who wins
        return gated(message("Opening it.", use), gates[i][0], after_deltas=1, after_3=gates[i][1])

    route(rule)
    store = runtime.store()
    commit = store.commit
    speak_kept: dict[str, threading.Event] = {}

    def watching_commit(state: Any, history: Any = (), **kwargs: Any) -> Any:
        committed = commit(state, history, **kwargs)
        if any('"tts.speak"' in item for _, item in kwargs.get("outbox", ())) and state.session_id in speak_kept:
            speak_kept[state.session_id].set()
        return committed

    monkeypatch.setattr(store, "commit", watching_commit)
    outcomes = {"toolCall made before the catch-up": 0, "toolCall made after it": 0}
    for i in range(ITERATIONS):
        gates[i] = (threading.Event(), threading.Event())
        first = conductor.connect()
        speak_kept[first.session_id] = threading.Event()
        conductor.start_session(first)
        talking = conductor.send_in_background(first, "userAudioTranscriptFinal", {"text": f"open it {i}"})
        wait_partials(conductor, first, 1)
        conductor.management.gone.add(first.connection_id)  # the network drops
        gates[i][0].set()
        assert speak_kept[first.session_id].wait(10)  # "Opening it." was said to nobody
        second = conductor.connect(first.session_id)
        last_seq = max(seqs(conductor.events(first)))
        run_in_threads(
            lambda c=second, n=last_seq: conductor.send(c, "sessionStart", {"sessionId": c.session_id, "lastSeq": n}),
            gates[i][1].set,
        )
        talking.join(30)
        assert not talking.is_alive()

        received = seqs(conductor.events(second))
        assert received == sorted(set(received)), f"iteration {i}: out of order or repeated: {received}"
        assert summarize(non_partial(conductor.events(second))) == [
            ("final", "Opening it."),
            ("toolCall", "tts.speak", {"text": "Opening it."}),
            ("toolCall", "editor.openFile", {"path": "a"}),
        ]
        call = model_calls(conductor.events(second))[0]
        state = store.load(first.session_id)
        assert state is not None and state.connection_live
        outcomes[
            "toolCall made before the catch-up" if call.seq < state.connection_start_seq else "toolCall made after it"
        ] += 1

        conductor.answer(second, call.payload.call_id)
        conductor.finish_turn(second)
        assert summarize(non_partial(by_seq(conductor.events(second))))[-1] == IDLE
        assert errors(conductor.events(second)) == []
        assert_valid_history(conductor.history(first.session_id))
        received = seqs(conductor.events(second))
        assert received == sorted(set(received))
        heard = sorted(seqs(non_partial(conductor.events(first))) + seqs(non_partial(conductor.events(second))))
        assert heard == outbox_seqs(first.session_id)
        release_moto_copies()
    report("sessionStart racing the turn it missed", ITERATIONS, conflicts, **outcomes)
