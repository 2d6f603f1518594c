"""A turn that ends in an error before anything was spoken speaks one short line of its cause."""

from __future__ import annotations

import pytest

from shared.core.failure_lines import FAILURE_LINES, FailureCause, bedrock_cause, failure_line
from shared.core.stream import stream_failed, stream_speak
from shared.wire.protocol import AssistantSpeechFinal, ErrorCode, ErrorPayload, ToolCall
from tests.core.test_lost_runner import started_turn
from tests.history_check import assert_valid_history


def spoken(events: list[object]) -> list[str]:
    return [e.arguments for e in events if isinstance(e, ToolCall) and e.name == "tts.speak"]


def test_every_cause_has_its_own_short_sentence() -> None:
    assert set(FAILURE_LINES) == set(FailureCause)
    assert len(set(FAILURE_LINES.values())) == len(FailureCause)
    assert all(line.endswith((".", "?")) and len(line) < 100 for line in FAILURE_LINES.values())


@pytest.mark.parametrize(
    ("code", "during_stream", "cause"),
    [
        ("ThrottlingException", False, FailureCause.THROTTLED),
        ("ServiceQuotaExceededException", False, FailureCause.THROTTLED),
        ("ValidationException", False, FailureCause.REFUSED),
        ("AccessDeniedException", False, FailureCause.REFUSED),
        ("ResourceNotFoundException", False, FailureCause.REFUSED),
        ("ModelTimeoutException", False, FailureCause.MODEL_TIMEOUT),
        ("InternalServerException", False, FailureCause.UNAVAILABLE),
        ("ReadTimeoutError", False, FailureCause.UNAVAILABLE),
        ("ModelStreamErrorException", True, FailureCause.MODEL_FAILED),
        ("throttlingException", True, FailureCause.MODEL_FAILED),
    ],
)
def test_bedrock_errors_map_to_what_the_person_can_do(code: str, during_stream: bool, cause: FailureCause) -> None:
    assert bedrock_cause(code, during_stream=during_stream) is cause


def test_an_error_code_without_a_cause_has_a_line_of_its_own() -> None:
    assert failure_line(ErrorCode.BEDROCK_ERROR) == FAILURE_LINES[FailureCause.MODEL_FAILED]
    assert failure_line(ErrorCode.CONDUCTOR_ERROR) == FAILURE_LINES[FailureCause.CONDUCTOR]
    assert failure_line(ErrorCode.BEDROCK_ERROR, FailureCause.THROTTLED) == FAILURE_LINES[FailureCause.THROTTLED]


def test_a_throttled_turn_speaks_its_line_before_idle_and_the_next_turn_answers() -> None:
    session, stream_id = started_turn()
    outcome = session.apply(
        stream_failed(
            session.state,
            stream_id,
            ErrorCode.BEDROCK_ERROR,
            "the model failed: ThrottlingException",
            cause=FailureCause.THROTTLED,
        )
    )
    line = FAILURE_LINES[FailureCause.THROTTLED]
    # Spoken, not shown: the app shows the error event; no final stands for words the model never said.
    assert [type(e) for e in outcome.events] == [ErrorPayload, ToolCall]
    assert not any(isinstance(e, AssistantSpeechFinal) for e in outcome.events)
    assert spoken(outcome.events) == [f'{{"text": "{line}"}}']
    assert session.state.turn is not None  # idle follows the line's playback
    speak_id = next(e.call_id for e in outcome.events if isinstance(e, ToolCall))
    ended = session.answer(speak_id, '{"spoken":true}')
    assert session.state.turn is None
    assert [e.arguments for e in ended.events if isinstance(e, ToolCall)] == ['{"state": "idle"}']
    assert_valid_history(session.history)
    assert session.say("again").run_model  # the next utterance starts a turn of its own
    assert [m["role"] for m in session.history] == ["user", "assistant", "user"]


def test_a_turn_that_already_spoke_gets_no_extra_line() -> None:
    session, stream_id = started_turn()
    session.apply(stream_speak(session.state, stream_id, text="It builds. Then", until=10))
    outcome = session.apply(stream_failed(session.state, stream_id, ErrorCode.BEDROCK_ERROR, "the model failed: x"))
    assert spoken(outcome.events) == []
