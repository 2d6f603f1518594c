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
CUT_OFF_LINE = "That answer ran too long and was cut off. Ask me for a shorter one, or one part at a time."
FILTERED_LINE = "I can't help with that one. Could you ask it another way?"
MALFORMED_LINE = "Sorry, my answer came out garbled. Could you say that again?"
CONTEXT_FULL_LINE = (
    "This conversation has grown too long for me to keep all of it in mind, so I'll focus on the recent part."
)
RUNNER_LOST_LINE = "Sorry, I lost that request. Could you say it again?"

# Bedrock stop reasons (the installed botocore model's StopReason) and what each means for the turn.
NORMAL_STOPS = frozenset({"end_turn", "tool_use", "stop_sequence", ""})
CUT_OFF_STOP = "max_tokens"
FILTERED_STOPS = frozenset({"content_filtered", "guardrail_intervened"})
MALFORMED_STOPS = frozenset({"malformed_model_output", "malformed_tool_use"})
CONTEXT_FULL_STOP = "model_context_window_exceeded"

CUT_OFF_MARKER = "[cut off: the reply reached the output limit; any tool call in it was dropped]"
FILTERED_MARKER = "[stopped by a content filter]"
MALFORMED_MARKER = "[the reply was malformed and dropped]"
CONTEXT_FULL_MARKER = "[cut off: the conversation filled the context window]"


@dataclass(frozen=True)
class CoreSettings:
    catalog_names: frozenset[str]
    max_tool_rounds: int = 8
    max_turns_per_minute: int = 30
    max_tool_result_chars: int = 16_000  # what the model sees of one tool result
    # A launched stream not claimed by its runner within this time never started (the runner's
    # asynchronous invocation gives up after its maximum event age, 60 s).
    stream_start_timeout_s: float = 90.0


DEFAULT_SETTINGS = CoreSettings(catalog_names=frozenset())


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

    def start_stream(self, turn: Turn, now: float) -> None:
        turn.stream = ActiveStream(stream_id=f"{turn.turn_id}.{turn.rounds}.{uuid.uuid4().hex[:8]}", launched_at=now)
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
    decision.start_stream(turn, now)
    decision.notes.append(f"turn {turn.turn_id} started")
    return decision.outcome()


def handle_tool_result(
    state: SessionState, result: ToolResult, settings: CoreSettings = DEFAULT_SETTINGS, *, now: float = 0.0
) -> Outcome:
    decision = _Decision(state)
    _end_lost_stream(decision, now, settings)
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
    call.result = tool_result_block(
        call.tool_use_id, cap_tool_result(text or "", settings.max_tool_result_chars), error=failed
    )
    turn = decision.state.turn
    assert turn is not None and turn.tools is not None
    if not turn.tools.pending():
        _close_round(decision, turn)
        decision.start_stream(turn, now)
    return decision.outcome()


def cap_tool_result(text: str, limit: int) -> str:
    """What the model sees of a tool result: at most ``limit`` characters, cut visibly."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[truncated: the result has {len(text):,} characters; only the first {limit:,} are shown]"


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


def handle_session_start(
    state: SessionState,
    start: SessionStart,
    connection_id: str,
    settings: CoreSettings = DEFAULT_SETTINGS,
    *,
    now: float = 0.0,
) -> Outcome:
    """A (re)connected app: re-send the model's calls still waiting for a result, except those
    already sent to this connection. A turn whose runner is gone ends here (never stuck thinking).

    With ``lastSeq`` the caller replays the kept events instead, pending calls among them.
    """
    decision = _Decision(state)
    if start.session_id.lower() != state.session_id:
        decision.send(_error(ErrorCode.INVALID_EVENT, "sessionStart.sessionId does not match the connection's session"))
        return decision.outcome()
    if connection_id != decision.state.connection_id:
        decision.notes.append("sessionStart from a connection the session has left: nothing to re-send")
        return decision.outcome()
    _end_lost_stream(decision, now, settings)
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


class StreamTaken(Exception):
    """Another runner invocation already holds this stream (an asynchronous invoke delivered twice)."""


def claim_stream(state: SessionState, stream_id: str, runner: str, *, deadline: float) -> Outcome:
    """A turn-runner invocation takes the stream it was launched for; only one ever does.

    Raises ``StreamSuperseded`` when the stream is no longer the session's (barge-in, new turn)
    and ``StreamTaken`` when another invocation holds it.
    """
    decision = _Decision(state)
    _, stream = _current_stream(decision, stream_id)
    if stream.runner is not None and stream.runner != runner:
        raise StreamTaken(stream_id)
    stream.runner = runner
    stream.deadline = deadline
    return decision.outcome()


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


def stream_finished(
    state: SessionState,
    stream_id: str,
    message: ModelMessage,
    settings: CoreSettings,
    *,
    window_cap: int | None = None,
) -> Outcome:
    """The model's message is complete: speak it, forward its tool calls, or end the turn.

    ``window_cap``: the runner had to send fewer messages than the window to fit the model's
    context; later requests start from that.
    """
    decision = _Decision(state)
    turn, stream = _current_stream(decision, stream_id)
    turn.stream = None
    if window_cap is not None:
        decision.state.window_cap = window_cap
    if message.stop_reason not in NORMAL_STOPS:
        _finish_abnormal(decision, turn, stream, message)
        return decision.outcome()
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
        decision.start_stream(turn, stream.launched_at)
    return decision.outcome()


def _finish_abnormal(decision: _Decision, turn: Turn, stream: ActiveStream, message: ModelMessage) -> None:
    """A message that stopped for another reason than finishing: its tool uses never run (a
    cut-off or filtered tool input must not reach the app, and re-asking would loop); the text is
    kept and spoken with a line that says why; the turn ends once it is spoken."""
    stop = message.stop_reason
    said = stream.text.strip()
    written = " ".join(block["text"] for block in message.history_content() if "text" in block)
    if stop == CUT_OFF_STOP:
        spoken, marker = f"{said} {CUT_OFF_LINE}".strip(), CUT_OFF_MARKER
    elif stop in FILTERED_STOPS:
        # A guardrail's text is its own configured message; a filtered reply's text is not for the user.
        keep = stop == "guardrail_intervened" and said
        spoken, marker = (said if keep else FILTERED_LINE), FILTERED_MARKER
        written = said if keep else ""
    elif stop in MALFORMED_STOPS:
        decision.send(_error(ErrorCode.BEDROCK_ERROR, f"the model's reply was malformed ({stop})"))
        spoken, marker, written = MALFORMED_LINE, MALFORMED_MARKER, ""
    elif stop == CONTEXT_FULL_STOP:
        spoken, marker = f"{said} {CONTEXT_FULL_LINE}".strip(), CONTEXT_FULL_MARKER
    else:
        decision.notes.append(f"unknown stop reason {stop!r}: the turn ends with what was said")
        spoken, marker = said or STALL_FALLBACK_LINE, ""
    if message.tool_uses:
        decision.notes.append(f"{len(message.tool_uses)} tool use(s) dropped: stop reason {stop!r}")
    decision.history.add("assistant", [text_block(f"{written} {marker}".strip() or spoken)])
    stream.said += stream.text
    stream.text = ""
    decision.speak(spoken, OwnPurpose.SPEAK_FINAL, turn.turn_id)


def stream_failed(
    state: SessionState, stream_id: str, code: ErrorCode, message: str, *, fallback_line: str | None = None
) -> Outcome:
    """The model failed (or the turn ran out of time): keep what was said, report, go idle.

    With ``fallback_line`` (a stalled stream) the app also speaks a short line, so the user
    hears why nothing more is coming; the turn then ends when it has been spoken.
    """
    decision = _Decision(state)
    turn, stream = _current_stream(decision, stream_id)
    _fail_stream(decision, turn, stream, code, message, fallback_line)
    return decision.outcome()


def _fail_stream(
    decision: _Decision,
    turn: Turn,
    stream: ActiveStream,
    code: ErrorCode,
    message: str,
    fallback_line: str | None,
) -> None:
    said = (stream.said + stream.text).strip()
    # The history always gets the model's side of this turn, even when it said nothing: the next
    # utterance then starts a new user message instead of growing the one that just failed.
    decision.history.add("assistant", [text_block(f"{said} {ERROR_MARKER}" if said else f"[no answer: {message}]")])
    if stream.text.strip():
        decision.send(AssistantSpeechFinal(text=stream.text.strip()))
    turn.stream = None
    decision.send(_error(code, message))
    if fallback_line:
        decision.speak(fallback_line, OwnPurpose.SPEAK_FINAL, turn.turn_id)
        return
    decision.end_turn(turn)


def _end_lost_stream(decision: _Decision, now: float, settings: CoreSettings) -> None:
    """End a stream whose runner is gone: never claimed in time, or held past its deadline."""
    turn = decision.state.turn
    stream = turn.stream if turn is not None else None
    if turn is None or stream is None or not now:
        return
    never_started = stream.runner is None and now - stream.launched_at > settings.stream_start_timeout_s
    overran = stream.deadline is not None and now > stream.deadline
    if never_started or overran:
        decision.notes.append(f"stream {stream.stream_id} lost its runner: the turn ends")
        reason = "the turn never started" if never_started else "the turn stopped unexpectedly"
        _fail_stream(decision, turn, stream, ErrorCode.CONDUCTOR_ERROR, reason, RUNNER_LOST_LINE)


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
