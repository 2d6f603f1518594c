"""convo.setState beyond thinking / idle: speaking and executing, for apps that announce them."""

from __future__ import annotations

import json

from shared.core import conductor
from shared.core.decision import CoreSettings, Outcome
from shared.core.model_output import MessageEnd, ModelMessage, TextDelta, ToolUseRequest
from shared.core.state import SessionState
from shared.core.stream import StreamReport, stream_finished, stream_tool_started
from shared.wire.protocol import SessionStart, ToolCall, ToolResult

SESSION = "6f1c1d7e-8a4b-4c1e-9a55-1d2b3c4d5e6f"
SETTINGS = CoreSettings(catalog_names=frozenset({"build.run"}))


class App:
    def __init__(self, capabilities: tuple[str, ...]) -> None:
        state = SessionState(session_id=SESSION, connection_id="conn-1")
        start = SessionStart(sessionId=SESSION, capabilities=capabilities)
        self.state = conductor.handle_session_start(state, start, "conn-1", SETTINGS, now=1.0).state
        self.heard: list[str] = []

    def apply(self, outcome: Outcome) -> Outcome:
        self.state = outcome.state
        for event in outcome.events:
            if isinstance(event, ToolCall):
                arguments = json.loads(event.arguments)
                self.heard.append(arguments["state"] if event.name == "convo.setState" else event.name)
        return outcome

    def message(self, stream_id: str, *items: object, text: str = "") -> Outcome:
        message = ModelMessage()
        for item in items:
            message.add(item)  # type: ignore[arg-type]
        message.add(MessageEnd("tool_use" if message.tool_uses else "end_turn"))
        if message.tool_uses and text:
            self.apply(stream_tool_started(self.state, stream_id, text=text))
            text = ""
        return self.apply(stream_finished(self.state, StreamReport(stream_id, message, text=text), SETTINGS))

    def answer(self, call_id: str) -> Outcome:
        return self.apply(conductor.handle_tool_result(self.state, ToolResult(callId=call_id, result="{}"), SETTINGS))


def a_turn_with_a_tool(app: App) -> None:
    stream = app.apply(conductor.handle_transcript(app.state, "build", now=2.0, settings=SETTINGS)).run_model
    assert stream
    use = ToolUseRequest("tu-1", "tool_call", {"name": "build.run", "arguments": {}})
    app.message(stream, TextDelta("Building."), use, text="Building.")
    resumed = app.answer("tu-1").run_model
    assert resumed
    app.message(resumed, TextDelta("It built."), text="It built.")
    app.answer(app.state.own_calls[-1].call_id)  # the last tts.speak was played


def test_an_app_that_announces_both_sees_speaking_and_executing() -> None:
    app = App(("speakingState", "executingState"))
    a_turn_with_a_tool(app)
    assert app.heard == [
        "thinking",
        "speaking",
        "tts.speak",
        "executing",
        "build.run",
        "thinking",
        "speaking",
        "tts.speak",
        "idle",
    ]


def test_an_app_that_announces_speaking_only_never_sees_executing() -> None:
    app = App(("speakingState",))
    a_turn_with_a_tool(app)
    assert app.heard == ["thinking", "speaking", "tts.speak", "build.run", "thinking", "speaking", "tts.speak", "idle"]


def test_an_app_without_them_sees_exactly_thinking_and_idle() -> None:
    app = App(())
    a_turn_with_a_tool(app)
    assert app.heard == ["thinking", "tts.speak", "build.run", "tts.speak", "idle"]
