"""Tools that never answer: past its deadline a call gets a timeout error and the model goes on."""

from __future__ import annotations

import json

from shared.core import conductor
from shared.core.decision import CoreSettings
from shared.core.model_output import MessageEnd, ModelMessage, ToolUseRequest
from shared.core.state import SessionState
from shared.core.stream import StreamReport, stream_finished
from shared.wire.protocol import ErrorPayload, ToolResult

SESSION = "6f1c1d7e-8a4b-4c1e-9a55-1d2b3c4d5e6f"
SETTINGS = CoreSettings(
    catalog_names=frozenset({"git.status", "build.run"}), tool_deadline_s=60, tool_deadlines=(("build.run", 600),)
)


def use(tool_use_id: str, name: str) -> ToolUseRequest:
    return ToolUseRequest(tool_use_id, "tool_call", {"name": name, "arguments": {}})


def waiting_for(*uses: ToolUseRequest, sent_at: float = 100.0) -> SessionState:
    state = SessionState(session_id=SESSION, connection_id="conn-1")
    started = conductor.handle_transcript(state, "go", now=sent_at - 1, settings=SETTINGS)
    assert started.run_model
    message = ModelMessage()
    for item in uses:
        message.add(item)
    message.add(MessageEnd("tool_use"))
    return stream_finished(started.state, StreamReport(started.run_model, message, now=sent_at), SETTINGS).state


def test_each_call_gets_its_tools_deadline() -> None:
    state = waiting_for(use("tu-1", "git.status"), use("tu-2", "build.run"))
    assert state.turn and state.turn.tools
    assert [call.deadline for call in state.turn.tools.calls] == [160.0, 700.0]
    assert conductor.next_tool_deadline(state) == 160.0


def test_nothing_happens_before_the_deadline() -> None:
    state = waiting_for(use("tu-1", "git.status"))
    out = conductor.handle_tool_deadlines(state, now=159.0)
    assert out.events == [] and out.run_model is None and out.state == state


def test_past_the_deadline_the_model_gets_a_timeout_and_goes_on() -> None:
    state = waiting_for(use("tu-1", "git.status"))
    out = conductor.handle_tool_deadlines(state, now=160.0)
    assert out.run_model  # the model is asked again, with the error result
    results = out.history[-1].content  # type: ignore[union-attr]
    assert results[0]["toolResult"]["status"] == "error"
    assert "did not answer git.status within 60 s" in json.dumps(results)
    late = conductor.handle_tool_result(out.state, ToolResult(callId="tu-1", result="{}"), SETTINGS)
    assert [e.code for e in late.events if isinstance(e, ErrorPayload)] == ["no_pending_tool_call"]


def test_a_round_waits_for_its_slowest_call() -> None:
    state = waiting_for(use("tu-1", "git.status"), use("tu-2", "build.run"))
    first = conductor.handle_tool_deadlines(state, now=200.0)
    assert first.run_model is None  # build.run still has time
    assert conductor.next_tool_deadline(first.state) == 700.0
    done = conductor.handle_tool_result(first.state, ToolResult(callId="tu-2", result="{}"), SETTINGS, now=300.0)
    assert done.run_model
