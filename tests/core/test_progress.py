"""Progress, cancelling and the "still running" line in the pure core, and what a turn cost.

The property: progress, cancels, results, barge-ins and reconnects in any order never give a call a
second answer, and no "still running" line is spoken once its call is answered."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from shared.core import conductor, progress, usage
from shared.core.decision import CoreSettings
from shared.core.model_output import MessageEnd, ModelMessage, ToolUseRequest, ToolUseStarted
from shared.core.state import ActiveStream, SessionState, Turn, Usage
from shared.core.stream import StreamReport, stream_finished
from shared.wire.protocol import ErrorPayload, ToolCall, ToolCancel, ToolProgress, ToolResult, TurnUsage

SETTINGS = CoreSettings(
    catalog_names=frozenset({"build.run", "editor.readFile", "conductor.status", "conductor.cancel", "tts.speak"}),
    background_tools=frozenset({"build.run"}),
    tool_deadlines=(("build.run", 600.0),),
)


def streaming(now: float = 100.0) -> SessionState:
    turn = Turn(turn_id="turn-1", stream=ActiveStream(stream_id="s1", launched_at=now), started_at=now)
    return SessionState(session_id="s", turn=turn, history_len=1, last_role="user", connection_id="c1")


def uses(state: SessionState, *calls: tuple[str, dict[str, object], str], now: float, used: Usage | None = None):
    assert state.turn is not None and state.turn.stream is not None
    message = ModelMessage()
    for index, (name, arguments, call_id) in enumerate(calls):
        message.add(ToolUseStarted(f"tu-{call_id}", "tool_call"))
        message.add(
            ToolUseRequest(f"tu-{call_id}", "tool_call", {"name": name, "arguments": arguments, "call_id": call_id})
        )
        del index
    message.add(MessageEnd("tool_use"))
    return stream_finished(state, StreamReport(state.turn.stream.stream_id, message, now=now, usage=used), SETTINGS)


def says(state: SessionState, now: float, used: Usage | None = None):
    assert state.turn is not None and state.turn.stream is not None
    message = ModelMessage()
    message.add(MessageEnd("end_turn"))
    return stream_finished(state, StreamReport(state.turn.stream.stream_id, message, now=now, usage=used), SETTINGS)


def result_text(outcome, tool_use_id: str) -> str:
    for op in outcome.history:
        for block in op.content:
            if "toolResult" in block and block["toolResult"]["toolUseId"] == tool_use_id:
                return block["toolResult"]["content"][0]["text"]
    raise AssertionError(f"no result for {tool_use_id}")


def progress_lines(events: list[object]) -> list[str]:
    return [
        json.loads(e.arguments)["text"]
        for e in events
        if isinstance(e, ToolCall) and e.name == "tts.speak" and "Still running" in e.arguments
    ]


def test_progress_of_a_background_job_is_kept_and_the_status_tool_reads_the_latest() -> None:
    state = says(uses(streaming(), ("build.run", {}, "b1"), now=100.0).state, 101.0).state
    for fraction, words in ((0.2, "Compiling 24 of 120"), (0.6, "Compiling 72 of 120")):
        state = progress.handle_tool_progress(
            state, ToolProgress(callId="b1", fraction=fraction, message=words), now=110
        ).state
        assert state.background[0].progress is not None
    unknown = progress.handle_tool_progress(state, ToolProgress(callId="nope", fraction=0.1), now=111.0)
    assert unknown.events == [] and unknown.state == state
    state.turn = Turn(turn_id="turn-2", stream=ActiveStream(stream_id="s2", launched_at=120.0))
    asked = uses(state, ("conductor.status", {}, "st1"), now=130.0)
    assert not [e for e in asked.events if isinstance(e, ToolCall) and e.name == "conductor.status"]
    assert asked.run_model is not None  # answered at once: the model goes on
    status = json.loads(result_text(asked, "tu-st1"))
    assert status["running"] == [
        {
            "callId": "b1",
            "name": "build.run",
            "kind": "background",
            "runningFor": "30 s",
            "progress": "60 %",
            "message": "Compiling 72 of 120",
        }
    ]


def test_cancel_sends_tool_cancel_answers_the_model_and_a_late_result_is_a_late_result() -> None:
    state = says(uses(streaming(), ("build.run", {}, "b1"), now=100.0).state, 101.0).state
    state.turn = Turn(turn_id="turn-2", stream=ActiveStream(stream_id="s2", launched_at=120.0))
    cancelled = uses(state, ("conductor.cancel", {"name": "build.run"}, "c1"), now=130.0)
    assert [(e.call_id, e.name) for e in cancelled.events if isinstance(e, ToolCancel)] == [("b1", "build.run")]
    assert json.loads(result_text(cancelled, "tu-c1"))["cancelled"] is True
    assert cancelled.state.background == []
    late = conductor.handle_tool_result(cancelled.state, ToolResult(callId="b1", result="{}"), SETTINGS, now=140.0)
    assert [e.code for e in late.events if isinstance(e, ErrorPayload)] == ["no_pending_tool_call"]
    assert late.state.background_reports == []
    nothing = uses(
        says(cancelled.state, 131.0).state.model_copy(
            update={"turn": Turn(turn_id="t3", stream=ActiveStream(stream_id="s3", launched_at=150.0))}
        ),
        ("conductor.cancel", {}, "c2"),
        now=150,
    )
    assert "nothing to cancel" in result_text(nothing, "tu-c2")


def test_a_foreground_call_gets_one_line_after_3_s_then_one_every_10_s_and_none_while_the_person_speaks() -> None:
    sent = uses(streaming(), ("editor.readFile", {"path": "a"}, "r1"), now=100.0)
    state = sent.state
    assert conductor.next_tool_deadline(state, SETTINGS) == 103.0
    early = conductor.handle_tool_deadlines(state, now=102.0, settings=SETTINGS)
    assert progress_lines(early.events) == []
    state = progress.handle_tool_progress(
        state, ToolProgress(callId="r1", fraction=0.4, message="Reading"), now=102.5
    ).state
    first = conductor.handle_tool_deadlines(state, now=103.0, settings=SETTINGS)
    assert progress_lines(first.events) == ["Still running editor.readFile, 40 %, Reading."]
    assert conductor.next_tool_deadline(first.state, SETTINGS) == 113.0
    again = conductor.handle_tool_deadlines(first.state, now=108.0, settings=SETTINGS)
    assert progress_lines(again.events) == []
    speaking = first.state.model_copy(deep=True)
    from shared.core.state import Listening

    speaking.listening = Listening(text="wait", key="wait", heard_at=112.0)
    held = conductor.handle_tool_deadlines(speaking, now=113.0, settings=SETTINGS)
    assert progress_lines(held.events) == [] and conductor.next_tool_deadline(held.state, SETTINGS) == 115.0
    answered = conductor.handle_tool_result(first.state, ToolResult(callId="r1", result="{}"), SETTINGS, now=110.0)
    assert progress.progress_due(answered.state, SETTINGS) is None
    after = conductor.handle_tool_deadlines(answered.state, now=113.0, settings=SETTINGS)
    assert progress_lines(after.events) == []


def test_usage_adds_up_every_request_of_the_turn_and_is_priced_from_the_table() -> None:
    one = usage.usage_of({"inputTokens": 1000, "outputTokens": 20, "cacheReadInputTokens": 500}, "m")
    two = usage.usage_of({"inputTokens": 1200, "outputTokens": 30, "cacheWriteInputTokens": 100}, "m")
    state = uses(streaming(), ("editor.readFile", {}, "r1"), now=100.0, used=one).state
    state = conductor.handle_tool_result(state, ToolResult(callId="r1", result="{}"), SETTINGS, now=101.0).state
    state.speculation_input_pending, state.speculation_output_pending = 300, 5
    assert state.turn is not None and state.turn.stream is not None
    done = says(state, 102.0, used=two)
    (event,) = [e for e in done.unnumbered if isinstance(e, TurnUsage)]
    assert (event.requests, event.input_tokens, event.output_tokens) == (2, 2200, 50)
    assert (event.cache_read_tokens, event.cache_write_tokens) == (500, 100)
    assert (event.speculation_input_tokens, event.speculation_output_tokens) == (300, 5)
    prices = usage.Prices(input=0.11, output=0.55, cache_write=0.1375, cache_read=0.011, as_of="2026-11-20")
    priced = usage.priced(event, prices)
    expected = (2500 * 0.11 + 55 * 0.55 + 100 * 0.1375 + 500 * 0.011) / 1_000_000
    assert priced.cost_usd == round(expected, 8) and priced.prices_as_of == "2026-11-20"
    assert done.state.usage_total.input_tokens == 2200 and done.state.speculation_input_pending == 0


def test_a_turn_past_the_daily_ceiling_is_refused_with_one_spoken_line() -> None:
    assert usage.over_budget(5.0, 5.0) and not usage.over_budget(4.99, 5.0) and not usage.over_budget(9.0, 0.0)
    state = SessionState(session_id="s", connection_id="c1")
    now = 1_795_780_000.0 - 1_795_780_000.0 % 86_400 + 20 * 3600  # 20:00 UTC
    refused = conductor.refuse_over_budget(state, now=now)
    assert refused.run_model is None and refused.state.turn is None
    assert [e.code for e in refused.events if isinstance(e, ErrorPayload)] == ["budget_exceeded"]
    (line,) = [json.loads(e.arguments)["text"] for e in refused.events if isinstance(e, ToolCall)]
    assert "midnight UTC" in line and "in about 4 hours" in line


# ---- the property -------------------------------------------------------------------------------

STEPS = st.lists(
    st.sampled_from(["progress", "result", "result", "barge_in", "reconnect", "alarm", "cancel", "late_alarm"]),
    max_size=12,
)


@settings(max_examples=200, deadline=None)
@given(STEPS)
def test_any_order_of_progress_cancel_results_barge_ins_and_reconnects_answers_each_call_once(steps: list[str]) -> None:
    outcome = uses(streaming(), ("editor.readFile", {}, "r1"), ("build.run", {}, "b1"), now=100.0)
    state, now = outcome.state, 100.0
    answers: dict[str, int] = {}
    answered_at: dict[str, float] = {}

    def count_answers(out) -> None:
        for op in out.history:
            for block in op.content:
                if "toolResult" in block:
                    use = block["toolResult"]["toolUseId"]
                    answers[use] = answers.get(use, 0) + 1
                    answered_at.setdefault(use, now)

    count_answers(outcome)
    for step in steps:
        now += 2.5
        if step == "progress":
            out = progress.handle_tool_progress(state, ToolProgress(callId="r1", fraction=0.5), now=now)
        elif step == "result":
            out = conductor.handle_tool_result(state, ToolResult(callId="r1", result="{}"), SETTINGS, now=now)
        elif step == "barge_in":
            out = conductor.handle_barge_in(state)
        elif step == "reconnect":
            out = conductor.handle_session_start(
                state,
                __import__("shared.wire.protocol", fromlist=["SessionStart"]).SessionStart(sessionId="s"),
                "c2",
                SETTINGS,
                now=now,
            )
        elif step in ("alarm", "late_alarm"):
            now += 8.0 if step == "late_alarm" else 0.0
            out = conductor.handle_tool_deadlines(state, now=now, settings=SETTINGS)
        else:
            turn = state.turn
            if turn is None or turn.stream is None:
                continue
            out = uses(state, ("conductor.cancel", {"name": "editor.readFile"}, f"c{now:.0f}"), now=now)
        count_answers(out)
        if "tu-r1" in answered_at and answered_at["tu-r1"] < now:
            assert progress_lines(out.events) == [], "a progress line after the call's result"
        state = out.state
    assert all(count == 1 for use, count in answers.items() if use in ("tu-r1", "tu-b1")), answers


def test_of_two_progress_events_decided_out_of_order_the_one_sent_later_is_kept() -> None:
    state = says(uses(streaming(), ("build.run", {}, "b1"), now=100.0).state, 101.0).state
    later = ToolProgress(callId="b1", fraction=0.6, message="Compiling 72")
    earlier = ToolProgress(callId="b1", fraction=0.2, message="Compiling 24")
    state = progress.handle_tool_progress(state, later, now=110.0, said_at=105.2).state
    state = progress.handle_tool_progress(state, earlier, now=110.1, said_at=105.1).state
    assert state.background[0].progress is not None and state.background[0].progress.fraction == 0.6
