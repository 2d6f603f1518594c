"""Background bookkeeping in the pure core: the model hears 'started', the job outlives turns,
and its outcome is reported once: at once when idle, after the running turn otherwise."""

from __future__ import annotations

import json

from shared.core import conductor
from shared.core.background import next_job_deadline
from shared.core.background_report import REPORT_MARKER
from shared.core.decision import CoreSettings
from shared.core.model_output import MessageEnd, ModelMessage, ToolUseRequest, ToolUseStarted
from shared.core.state import ActiveStream, SessionState, Turn
from shared.core.stream import StreamReport, stream_finished
from shared.wire.protocol import ToolResult

SETTINGS = CoreSettings(
    catalog_names=frozenset({"build.run", "editor.openFile"}),
    background_tools=frozenset({"build.run"}),
    tool_deadlines=(("build.run", 600.0),),
)


def streaming(now: float = 100.0) -> SessionState:
    turn = Turn(turn_id="turn-1", stream=ActiveStream(stream_id="s1", launched_at=now))
    return SessionState(session_id="s", turn=turn, history_len=1, last_role="user", connection_id="c1")


def calls_build(state: SessionState, now: float = 100.0) -> SessionState:
    message = ModelMessage()
    message.add(ToolUseStarted("tu-1", "tool_call"))
    message.add(ToolUseRequest("tu-1", "tool_call", {"name": "build.run", "arguments": {}, "call_id": "b1"}))
    message.add(MessageEnd("tool_use"))
    outcome = stream_finished(state, StreamReport("s1", message, now=now), SETTINGS)
    assert [getattr(e, "name", None) for e in outcome.events if type(e).__name__ == "ToolCall"][-1] == "build.run"
    assert outcome.run_model is not None  # the model goes on at once
    (results,) = [op for op in outcome.history if op.role == "user"]
    assert json.loads(results.content[0]["toolResult"]["content"][0]["text"])["started"] is True
    return outcome.state


def ended(state: SessionState, now: float) -> SessionState:
    """The model says it started and the turn ends."""
    assert state.turn is not None and state.turn.stream is not None
    message = ModelMessage()
    message.add(MessageEnd("end_turn"))
    outcome = stream_finished(state, StreamReport(state.turn.stream.stream_id, message, now=now), SETTINGS)
    return outcome.state


def test_a_result_while_idle_starts_one_report_turn() -> None:
    state = ended(calls_build(streaming()), 101.0)
    assert state.turn is None and [job.call_id for job in state.background] == ["b1"]
    assert next_job_deadline(state) == 700.0
    outcome = conductor.handle_tool_result(state, ToolResult(callId="b1", result='{"ok":true}'), SETTINGS, now=160.0)
    assert outcome.run_model is not None and outcome.state.background == []
    (report,) = [op for op in outcome.history if op.role == "user"]
    assert report.content[0]["text"].startswith(REPORT_MARKER) and '{"ok":true}' in report.content[0]["text"]
    again = conductor.handle_tool_result(outcome.state, ToolResult(callId="b1", result="{}"), SETTINGS, now=161.0)
    assert [getattr(e, "code", None) for e in again.events] == ["no_pending_tool_call"]


def test_a_result_during_a_turn_waits_for_its_end_and_a_deadline_is_reported_the_same_way() -> None:
    running = calls_build(streaming())  # the model still speaks: a turn runs
    waiting = conductor.handle_tool_result(running, ToolResult(callId="b1", error="exit 65"), SETTINGS, now=120.0)
    assert waiting.run_model is None and [r.name for r in waiting.state.background_reports] == ["build.run"]
    after = ended(waiting.state, 121.0)
    assert after.turn is not None and after.background_reports == []  # the report turn began at idle

    idle = ended(calls_build(streaming()), 101.0)
    expired = conductor.handle_tool_deadlines(idle, now=701.0)
    assert expired.run_model is not None and expired.state.background == []
    (report,) = [op for op in expired.history if op.role == "user"]
    assert "no result came from the app within 600 s" in report.content[0]["text"]


def test_a_barge_in_or_a_new_request_never_ends_a_job() -> None:
    state = calls_build(streaming())
    interrupted = conductor.handle_barge_in(state).state
    assert [job.call_id for job in interrupted.background] == ["b1"]
    renewed = conductor.handle_transcript(interrupted, "something else", now=130.0, settings=SETTINGS).state
    assert [job.call_id for job in renewed.background] == ["b1"]


def test_a_long_change_said_yes_to_runs_in_the_background() -> None:
    settings = CoreSettings(
        catalog_names=frozenset({"build.run"}),
        background_tools=frozenset({"build.run"}),
        changing_tools=frozenset({"build.run"}),
    )
    state = streaming()
    message = ModelMessage()
    message.add(ToolUseStarted("tu-1", "tool_call"))
    message.add(ToolUseRequest("tu-1", "tool_call", {"name": "build.run", "arguments": {}, "call_id": "b1"}))
    message.add(MessageEnd("tool_use"))
    asked = stream_finished(state, StreamReport("s1", message, now=100.0), settings)
    assert asked.run_model is None and not [e for e in asked.events if getattr(e, "name", None) == "build.run"]
    yes = conductor.handle_transcript(asked.state, "yes", now=110.0, settings=settings)
    assert [getattr(e, "name", None) for e in yes.events].count("build.run") == 1
    assert yes.run_model is not None and [job.call_id for job in yes.state.background] == ["b1"]
