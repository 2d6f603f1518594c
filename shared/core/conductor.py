"""The turn state machine (DESIGN.md, "The turn, event by event") as pure functions.

Each function takes the stored session state plus one input and returns an ``Outcome``: the new
state, the events to send (in order), the history writes, and whether to run the model now.
The caller commits state and history together with optimistic locking and may call the same
function again on fresher state after a lost race, so nothing here has side effects.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field

from shared.core.history_ops import HistoryOp, HistoryWriter
from shared.core.messages import (
    ERROR_MARKER,
    INTERRUPTED_MARKER,
    text_block,
    tool_result_block,
)
from shared.core.model_output import ModelMessage
from shared.core.state import (
    CALL_IDS_KEPT,
    OWN_CALLS_KEPT,
    ActiveStream,
    ModelCall,
    OwnCall,
    OwnPurpose,
    SessionState,
    ToolRound,
    Turn,
)
from shared.core.wrapper import RejectedUse, unwrap_tool_use
from shared.protocol import (
    AssistantSpeechFinal,
    AssistantSpeechPartial,
    ErrorCode,
    ErrorPayload,
    Payload,
    SessionStart,
    ToolCall,
    ToolResult,
)

SET_STATE_TOOL = "convo.setState"
SPEAK_TOOL = "tts.speak"


STALL_FALLBACK_LINE = "Sorry, I lost my train of thought. Could you say that again?"


@dataclass(frozen=True)
class CoreSettings:
    catalog_names: frozenset[str]
    max_tool_rounds: int = 8
    max_turns_per_minute: int = 30


@dataclass
class Outcome:
    state: SessionState
    events: list[Payload] = field(default_factory=list)
    history: list[HistoryOp] = field(default_factory=list)
    run_model: str | None = None  # stream id: run the model now, holding this id
    notes: list[str] = field(default_factory=list)
    first_seq: int = 0  # ``seq`` of the first event; the others follow in order

    def numbered_events(self) -> list[tuple[int, Payload]]:
        return [(self.first_seq + index, payload) for index, payload in enumerate(self.events)]


class StreamSuperseded(Exception):
    """The stream is no longer the session's current one (barge-in, new turn): stop it."""


def _new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:16]}"


def _error(code: ErrorCode, message: str) -> ErrorPayload:
    return ErrorPayload(code=str(code), message=message)


class _Decision:
    """Accumulates one outcome on a private copy of the state."""

    def __init__(self, state: SessionState) -> None:
        self.state = state.model_copy(deep=True)
        self.events: list[Payload] = []
        self.history = HistoryWriter(self.state.history_len, self.state.last_role)
        self.run_model: str | None = None
        self.notes: list[str] = []

    def send(self, payload: Payload) -> None:
        self.events.append(payload)

    def own_call(self, name: str, arguments: dict[str, str], purpose: OwnPurpose, turn_id: str) -> None:
        call_id = _new_id("conductor")
        self.state.own_calls = [*self.state.own_calls, OwnCall(call_id=call_id, purpose=purpose, turn_id=turn_id)][
            -OWN_CALLS_KEPT:
        ]
        self.send(ToolCall(call_id=call_id, name=name, arguments=json.dumps(arguments, ensure_ascii=False)))

    def speak(self, text: str, purpose: OwnPurpose, turn_id: str) -> None:
        self.send(AssistantSpeechFinal(text=text))
        self.own_call(SPEAK_TOOL, {"text": text}, purpose, turn_id)

    def set_state(self, value: str, turn_id: str) -> None:
        purpose = OwnPurpose.THINKING if value == "thinking" else OwnPurpose.IDLE
        self.own_call(SET_STATE_TOOL, {"state": value}, purpose, turn_id)

    def start_stream(self, turn: Turn) -> None:
        turn.stream = ActiveStream(stream_id=f"{turn.turn_id}.{turn.rounds}.{uuid.uuid4().hex[:8]}")
        self.run_model = turn.stream.stream_id

    def end_turn(self, turn: Turn) -> None:
        self.set_state("idle", turn.turn_id)
        self.state.turn = None

    def remember_call_ids(self, call_ids: list[str]) -> None:
        self.state.recent_call_ids = [*self.state.recent_call_ids, *call_ids][-CALL_IDS_KEPT:]

    def outcome(self) -> Outcome:
        self.state.history_len = self.history.history_len
        self.state.last_role = self.history.last_role
        first_seq = self.state.next_seq
        self.state.next_seq += len(self.events)
        return Outcome(self.state, self.events, self.history.ops(), self.run_model, self.notes, first_seq)


# ---- client events -------------------------------------------------------------------------


def handle_transcript(state: SessionState, text: str, *, now: float, settings: CoreSettings) -> Outcome:
    """A final transcript starts a turn, cancelling whatever turn is still in progress."""
    decision = _Decision(state)
    if not text.strip():
        decision.send(_error(ErrorCode.EMPTY_TRANSCRIPT, "the transcript is empty"))
        return decision.outcome()
    recent = [started for started in decision.state.turn_starts if now - started < 60]
    if len(recent) >= settings.max_turns_per_minute:
        decision.send(
            _error(ErrorCode.RATE_LIMITED, f"at most {settings.max_turns_per_minute} requests a minute; wait a moment")
        )
        return decision.outcome()
    decision.state.turn_starts = [*recent, now]
    _cancel_turn(decision, "the user started a new request")
    turn = Turn(turn_id=_new_id("turn"))
    decision.state.turn = turn
    decision.history.add("user", [text_block(text.strip())])
    decision.set_state("thinking", turn.turn_id)
    decision.start_stream(turn)
    decision.notes.append(f"turn {turn.turn_id} started")
    return decision.outcome()


def handle_tool_result(state: SessionState, result: ToolResult) -> Outcome:
    decision = _Decision(state)
    own = decision.state.own_call(result.call_id)
    if own is not None:
        decision.state.own_calls = [call for call in decision.state.own_calls if call.call_id != result.call_id]
        turn = decision.state.turn
        if own.purpose is OwnPurpose.SPEAK_FINAL and turn is not None and turn.turn_id == own.turn_id:
            decision.end_turn(turn)
        return decision.outcome()
    call = decision.state.model_call(result.call_id)
    if call is None or call.result is not None:
        decision.send(_error(ErrorCode.NO_PENDING_TOOL_CALL, f"no pending tool call {result.call_id!r}"))
        return decision.outcome()
    failed = result.error is not None
    text = result.error if failed else (result.result if result.result is not None else "null")
    call.result = tool_result_block(call.tool_use_id, text or "", error=failed)
    turn = decision.state.turn
    assert turn is not None and turn.tools is not None
    if not turn.tools.pending():
        _close_round(decision, turn)
        decision.start_stream(turn)
    return decision.outcome()


def handle_barge_in(state: SessionState) -> Outcome:
    """The user spoke over the assistant: stop the stream, answer pending calls, go idle."""
    decision = _Decision(state)
    turn = decision.state.turn
    if turn is None:
        decision.notes.append("barge-in with no turn in progress")
        return decision.outcome()
    _cancel_turn(decision, "the user interrupted")
    decision.end_turn(turn)
    return decision.outcome()


def handle_session_start(state: SessionState, start: SessionStart, connection_id: str) -> Outcome:
    """A (re)connected app: re-send the model's calls still waiting for a result, except those
    already sent to this connection.

    With ``lastSeq`` the caller replays the kept events instead, pending calls among them.
    """
    decision = _Decision(state)
    if start.session_id.lower() != state.session_id:
        decision.send(_error(ErrorCode.INVALID_EVENT, "sessionStart.sessionId does not match the connection's session"))
        return decision.outcome()
    if connection_id != decision.state.connection_id:
        decision.notes.append("sessionStart from a connection the session has left: nothing to re-send")
        return decision.outcome()
    turn = decision.state.turn
    if start.last_seq is None and turn is not None and turn.tools is not None:
        for call in turn.tools.pending():
            if call.sent_to == decision.state.connection_id:
                continue
            call.sent_to = decision.state.connection_id
            decision.send(ToolCall(call_id=call.call_id, name=call.name, arguments=call.arguments))
    return decision.outcome()


# ---- the model stream ----------------------------------------------------------------------


def _current_stream(decision: _Decision, stream_id: str) -> tuple[Turn, ActiveStream]:
    turn = decision.state.turn
    if turn is None or turn.stream is None or turn.stream.stream_id != stream_id:
        raise StreamSuperseded(stream_id)
    return turn, turn.stream


def stream_text(state: SessionState, stream_id: str, delta: str) -> Outcome:
    decision = _Decision(state)
    _, stream = _current_stream(decision, stream_id)
    stream.text += delta
    if stream.text.strip():
        decision.send(AssistantSpeechPartial(text=stream.text.lstrip()))
    return decision.outcome()


def stream_tool_started(state: SessionState, stream_id: str) -> Outcome:
    """Text said before a tool call is finalized and spoken before the call goes out."""
    decision = _Decision(state)
    turn, stream = _current_stream(decision, stream_id)
    _finalize_segment(decision, turn, stream, OwnPurpose.SPEAK_BEFORE_TOOLS)
    return decision.outcome()


def stream_finished(state: SessionState, stream_id: str, message: ModelMessage, settings: CoreSettings) -> Outcome:
    decision = _Decision(state)
    turn, stream = _current_stream(decision, stream_id)
    turn.stream = None
    content = message.history_content()
    if not message.tool_uses:
        decision.history.add("assistant", content)
        if _finalize_segment(decision, turn, stream, OwnPurpose.SPEAK_FINAL):
            return decision.outcome()  # the turn ends when the app has spoken it
        decision.end_turn(turn)
        return decision.outcome()
    _finalize_segment(decision, turn, stream, OwnPurpose.SPEAK_BEFORE_TOOLS)
    turn.rounds += 1
    round_ = ToolRound(assistant_content=content, tool_use_order=[use.tool_use_id for use in message.tool_uses])
    turn.tools = round_
    if turn.rounds > settings.max_tool_rounds:
        for use in message.tool_uses:
            round_.rejected[use.tool_use_id] = tool_result_block(
                use.tool_use_id, "cancelled: too many tool rounds in one turn", error=True
            )
        _close_round(decision, turn)
        decision.send(
            _error(
                ErrorCode.CONDUCTOR_ERROR,
                f"the turn stopped after {settings.max_tool_rounds} rounds of tool calls",
            )
        )
        decision.end_turn(turn)
        return decision.outcome()
    taken = set(decision.state.recent_call_ids)
    for use in message.tool_uses:
        unwrapped = unwrap_tool_use(
            use.tool_use_id,
            use.name,
            use.input,
            catalog_names=settings.catalog_names,
            taken_call_ids=taken,
        )
        if isinstance(unwrapped, RejectedUse):
            round_.rejected[use.tool_use_id] = tool_result_block(use.tool_use_id, unwrapped.reason, error=True)
            decision.send(_error(ErrorCode.INVALID_TOOL_CALL, unwrapped.reason))
            continue
        taken.add(unwrapped.call_id)
        round_.calls.append(
            ModelCall(
                call_id=unwrapped.call_id,
                tool_use_id=use.tool_use_id,
                name=unwrapped.name,
                arguments=unwrapped.arguments,
                sent_to=decision.state.connection_id,
            )
        )
        decision.send(ToolCall(call_id=unwrapped.call_id, name=unwrapped.name, arguments=unwrapped.arguments))
    decision.remember_call_ids([call.call_id for call in round_.calls])
    if not round_.pending():
        _close_round(decision, turn)  # every use was malformed: let the model see why and retry
        decision.start_stream(turn)
    return decision.outcome()


def stream_failed(
    state: SessionState, stream_id: str, code: ErrorCode, message: str, *, fallback_line: str | None = None
) -> Outcome:
    """The model failed (or the turn ran out of time): keep what was said, report, go idle.

    With ``fallback_line`` (a stalled stream) the app also speaks a short line, so the user
    hears why nothing more is coming; the turn then ends when it has been spoken.
    """
    decision = _Decision(state)
    turn, stream = _current_stream(decision, stream_id)
    said = (stream.said + stream.text).strip()
    if said:
        decision.history.add("assistant", [text_block(f"{said} {ERROR_MARKER}")])
    if stream.text.strip():
        decision.send(AssistantSpeechFinal(text=stream.text.strip()))
    turn.stream = None
    decision.send(_error(code, message))
    if fallback_line:
        decision.speak(fallback_line, OwnPurpose.SPEAK_FINAL, turn.turn_id)
        return decision.outcome()
    decision.end_turn(turn)
    return decision.outcome()


# ---- helpers --------------------------------------------------------------------------------


def _finalize_segment(decision: _Decision, turn: Turn, stream: ActiveStream, purpose: OwnPurpose) -> bool:
    """Send final + tts.speak for the current speech segment; False when it was empty."""
    text = stream.text.strip()
    stream.said += stream.text
    stream.text = ""
    if not text:
        return False
    decision.speak(text, purpose, turn.turn_id)
    return True


def _close_round(decision: _Decision, turn: Turn) -> None:
    """Store the tool-use message and all its results together."""
    assert turn.tools is not None
    decision.history.add("assistant", turn.tools.assistant_content)
    decision.history.add("user", turn.tools.results_in_order())
    turn.tools = None


def _cancel_turn(decision: _Decision, reason: str) -> None:
    """End the turn in progress so the stored history stays valid for Bedrock."""
    turn = decision.state.turn
    if turn is None:
        return
    if turn.stream is not None:
        said = (turn.stream.said + turn.stream.text).strip()
        if said:
            decision.history.add("assistant", [text_block(f"{said} {INTERRUPTED_MARKER}")])
        turn.stream = None
        decision.notes.append(f"stream of turn {turn.turn_id} stopped: {reason}")
    if turn.tools is not None:
        for call in turn.tools.pending():
            call.result = tool_result_block(call.tool_use_id, f"cancelled: {reason}", error=True)
        _close_round(decision, turn)
        decision.notes.append(f"pending tool calls of turn {turn.turn_id} cancelled: {reason}")
    decision.state.turn = None
