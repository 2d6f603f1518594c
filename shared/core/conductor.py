"""The turn state machine (``docs/protocol.md``, "A turn, event by event") as pure functions.

Each function takes the stored session state plus one input and returns an ``Outcome``: the new
state, the events to send (in order), the history writes, and whether to run the model now.
The caller commits state and history together with optimistic locking and may call the same
function again on fresher state after a lost race, so nothing here has side effects.

This module holds the decisions on the app's events; the model stream's are in
``shared.core.stream``, the building blocks (``Outcome``, ``CoreSettings``, ``StreamSuperseded``) in
``shared.core.decision``. Each name is imported from the module that defines it.
"""

from __future__ import annotations

import json

from shared.core import background, confirming, progress, speculation, usage
from shared.core.confirmation_words import Verdict, verdict
from shared.core.decision import (
    DEFAULT_SETTINGS,
    SPEAK_TOOL,
    CoreSettings,
    Decision,
    Outcome,
    close_round,
    error_payload,
    is_unrecorded_own_call,
    may_resume_the_model,
    new_id,
)
from shared.core.messages import INTERRUPTED_MARKER, cap_tool_result, text_block, tool_result_block
from shared.core.session_index import clean_title, note_utterance
from shared.core.speakable import split_answer
from shared.core.state import ActiveStream, ModelCall, OwnPurpose, SessionState, Turn
from shared.core.stream import end_lost_stream
from shared.core.wrapper import ClientTool
from shared.wire.protocol import (
    AUTO_APPROVE_CHANGES,
    EXECUTING_STATE,
    MAX_HEARD_TEXT,
    SENTENCE_SPEECH,
    SPEAKING_STATE,
    WHOLE_SENTENCES,
    AssistantSpeechFinal,
    ErrorCode,
    Handoff,
    SessionStart,
    ToolCall,
    ToolResult,
)
from shared.wire.protocol_tools import MCP_TOOL_PREFIX

MAX_SUMMARY_CHARS = 4000

KNOWN_CAPABILITIES = frozenset(
    {SENTENCE_SPEECH, WHOLE_SENTENCES, SPEAKING_STATE, EXECUTING_STATE, AUTO_APPROVE_CHANGES}
)


# ---- client events -------------------------------------------------------------------------


def handle_transcript(state: SessionState, text: str, *, now: float, settings: CoreSettings) -> Outcome:
    """A final transcript starts a turn, cancelling whatever turn is still in progress."""
    decision = Decision(state)
    if not text.strip():
        decision.send(error_payload(ErrorCode.EMPTY_TRANSCRIPT, "the transcript is empty"))
        return decision.outcome()
    if state.ended_at is not None:  # sent before the end's close reached the app
        decision.send(error_payload(ErrorCode.SESSION_ENDED, "the session was ended; reconnect to resume it"))
        return decision.outcome()
    recent = [started for started in decision.state.turn_starts if now - started < 60]
    if len(recent) >= settings.max_turns_per_minute:
        speculation.drop(decision, "the final transcript was refused")
        decision.state.listening = None
        decision.send(
            error_payload(
                ErrorCode.RATE_LIMITED, f"at most {settings.max_turns_per_minute} requests a minute; wait a moment"
            )
        )
        return decision.outcome()
    if confirming.asking(decision.state):
        said = verdict(text)
        if said is not Verdict.OTHER:
            return confirming.handle_answer(state, said, settings, now=now)
        decision = Decision(confirming.declined_for_new_request(decision.state))
    decision.state.turn_starts = [*recent, now]
    promoted = speculation.take_final(decision, text, now)
    note_utterance(decision.state, text, now)
    if promoted is not None:  # the model has been answering it: its runner lets the answer out
        decision.history.add("user", [text_block(text.strip())])
        promoted.shown = "thinking"
        promoted.started_at = now
        decision.set_state("thinking", promoted.turn_id)
        return decision.outcome()
    _cancel_turn(decision, "the user started a new request")
    turn = Turn(turn_id=new_id("turn"), started_at=now)
    decision.state.turn = turn
    decision.history.add("user", [text_block(text.strip())])
    decision.set_state("thinking", turn.turn_id)
    decision.start_stream(turn, now)
    decision.notes.append(f"turn {turn.turn_id} started")
    return decision.outcome()


def refuse_over_budget(state: SessionState, *, now: float) -> Outcome:
    """A final transcript past the person's daily ceiling: no turn, an error and one spoken line."""
    decision = Decision(state)
    speculation.drop(decision, "the person is over their daily ceiling")
    decision.state.listening = None
    decision.send(
        error_payload(ErrorCode.BUDGET_EXCEEDED, "today's spending limit is reached; it resets at midnight UTC")
    )
    decision.own_call(SPEAK_TOOL, {"text": usage.budget_line(now)}, OwnPurpose.SPEAK_PROGRESS, "budget")
    return decision.outcome()


def handle_tool_result(
    state: SessionState, result: ToolResult, settings: CoreSettings = DEFAULT_SETTINGS, *, now: float = 0.0
) -> Outcome:
    decision = Decision(state)
    end_lost_stream(decision, now, settings)
    own = decision.state.own_call(result.call_id)
    if own is None and (is_unrecorded_own_call(result.call_id) or not may_resume_the_model(result.call_id)):
        return decision.outcome()  # an acknowledgement that changes nothing, or one sent again
    if own is not None:
        decision.state.own_calls = [call for call in decision.state.own_calls if call.call_id != result.call_id]
        turn = decision.state.turn
        if own.purpose is OwnPurpose.SPEAK_FINAL and turn is not None and turn.turn_id == own.turn_id:
            playback = speak_playback(result)
            if playback is not None and decision.state.last_role == "assistant":
                mark_cut_off_answer(decision, playback)
            decision.end_turn(turn, now)
        return decision.outcome()
    if background.job_of(decision.state, result.call_id) is not None:
        return background.handle_background_result(state, result, settings, now=now)
    call = decision.state.model_call(result.call_id)
    if call is None or call.result is not None:
        decision.send(error_payload(ErrorCode.NO_PENDING_TOOL_CALL, f"no pending tool call {result.call_id!r}"))
        return decision.outcome()
    if call.parts is not None:  # a whole result after some parts: the parts are not needed
        decision.parts_dropped.append((call.call_id, call.parts.count))
        call.parts = None
    failed = result.error is not None
    text = result.error if failed else (result.result if result.result is not None else "null")
    call.result = tool_result_block(
        call.tool_use_id, cap_tool_result(text or "", settings.max_tool_result_chars), error=failed
    )
    turn = decision.state.turn
    assert turn is not None and turn.tools is not None
    if not turn.tools.pending():
        close_round(decision, turn)
        decision.start_stream(turn, now)
    return decision.outcome()


def handle_tool_deadlines(state: SessionState, *, now: float, settings: CoreSettings | None = None) -> Outcome:
    """Tool calls the app has not answered by their deadline get a timeout error result, so the
    model goes on (a late result is then answered ``no_pending_tool_call``); with ``settings``, a
    foreground call that takes long gets its "still running" line (``shared.core.progress``)."""
    decision = Decision(state)
    background.expire_jobs(decision, now)
    turn = decision.state.turn
    if turn is None or turn.tools is None:
        return decision.outcome()
    if settings is not None:
        progress.speak_progress(decision, settings, now)
    overdue = [call for call in turn.tools.pending() if _overdue(call, now)]
    for call in overdue:
        waited = call.deadline - turn.tools.sent_at if turn.tools.sent_at else 0
        reason = f"timed out: the app did not answer {call.name} within {waited:.0f} s"
        if call.parts is not None and call.parts.due and now >= call.parts.due and now < (call.deadline or now + 1):
            waited = call.parts.due - call.parts.first_at
            reason = f"timed out: the parts of the app's {call.name} result did not all arrive within {waited:.0f} s"
        if call.held:
            reason = confirming.NOT_CONFIRMED
            call.held = False
        if call.parts is not None:
            reason += f" (it sent {len(call.parts.received)} of the {call.parts.count} parts of its result)"
            decision.parts_dropped.append((call.call_id, call.parts.count))
            call.parts = None
        call.result = tool_result_block(call.tool_use_id, reason, error=True)
        decision.notes.append(f"tool call {call.call_id} ({call.name}) timed out")
    if overdue and not turn.tools.pending():
        close_round(decision, turn)
        decision.start_stream(turn, now)
    return decision.outcome()


def _overdue(call: ModelCall, now: float) -> bool:
    """Past the call's deadline, or past the time its result in parts had to be whole."""
    parts_due = call.parts.due if call.parts is not None else 0.0
    return bool(call.deadline and now >= call.deadline) or bool(parts_due and now >= parts_due)


def next_tool_deadline(state: SessionState, settings: CoreSettings | None = None) -> float | None:
    """The earliest deadline of the calls and background jobs still waiting for the app (epoch
    seconds); with ``settings``, also the next "still running" line of a foreground call."""
    turn = state.turn
    pending = turn.tools.pending() if turn and turn.tools else []
    deadlines = [call.deadline for call in pending if call.deadline]
    deadlines += [call.parts.due for call in pending if call.parts is not None and call.parts.due]
    if (job_deadline := background.next_job_deadline(state)) is not None:
        deadlines.append(job_deadline)
    if settings is not None and (line_due := progress.progress_due(state, settings)) is not None:
        deadlines.append(line_due)
    return min(deadlines) if deadlines else None


def remember_memory(
    state: SessionState, *, summary: str | None = None, until: int = 0, runner: str | None = None
) -> Outcome:
    """A rolling summary now covering the history before seq ``until`` (kept only if it covers
    more than the stored one), written by the memory write ``runner`` announced (the announcement
    goes with it, even when nothing was made)."""
    decision = Decision(state)
    if summary is not None and summary.strip() and until > decision.state.summary_until:
        # The state item is rewritten by every commit and limited to 400 KB: however long the
        # model's summary, the stored one stays short.
        decision.state.summary, decision.state.summary_until = summary.strip()[:MAX_SUMMARY_CHARS], until
    if runner is not None:
        decision.state.memory_writes = [write for write in decision.state.memory_writes if write.runner != runner]
    return decision.outcome()


def speak_playback(result: ToolResult) -> str | None:
    """What a tts.speak result says about an interrupted playback: the heard text ("" when
    nothing), or None when it was spoken in full, not played at all (``reason``: the app had no
    voice or its speech engine failed; the answer stands as shown), or the result says nothing."""
    try:
        value = json.loads(result.result or "")
    except ValueError:
        return None
    if not isinstance(value, dict) or value.get("spoken") is not False or isinstance(value.get("reason"), str):
        return None
    heard = value.get("heardText")
    return heard[:MAX_HEARD_TEXT] if isinstance(heard, str) else ""


def handle_barge_in(state: SessionState, heard_text: str | None = None) -> Outcome:
    """The user spoke over the assistant: stop the stream, answer pending calls, go idle.

    The history keeps what the user heard: ``heard_text`` when the app reports it, else what was
    sent to tts.speak; an answer interrupted while it was being played is marked as such.
    """
    decision = Decision(state)
    turn = decision.state.turn
    if turn is None:
        decision.notes.append("barge-in with no turn in progress")
        return decision.outcome()
    if turn.speculative is not None:  # nothing of it was said: nothing to stop on the app
        speculation.drop(decision, "the user interrupted")
        return decision.outcome()
    if turn.stream is None and turn.tools is None and decision.state.last_role == "assistant":
        mark_cut_off_answer(decision, heard_text)  # during playback of the final answer
    _cancel_turn(decision, "the user interrupted", heard_text=heard_text)
    decision.end_turn(turn)
    return decision.outcome()


def mark_cut_off_answer(decision: Decision, heard_text: str | None) -> None:
    """The stored answer was cut off while it was spoken: keep what was heard, marked."""
    if heard_text is not None:
        heard = heard_text.strip()
        decision.history.replace_last([text_block(f"{heard} {INTERRUPTED_MARKER}" if heard else INTERRUPTED_MARKER)])
    else:
        decision.history.add("assistant", [text_block(INTERRUPTED_MARKER)])


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
    decision = Decision(state)
    if start.session_id.lower() != state.session_id:
        decision.send(
            error_payload(ErrorCode.INVALID_EVENT, "sessionStart.sessionId does not match the connection's session")
        )
        return decision.outcome()
    if connection_id != decision.state.connection_id:
        decision.notes.append("sessionStart from a connection the session has left: nothing to re-send")
        return decision.outcome()
    decision.state.capabilities = sorted(set(start.capabilities or ()) & KNOWN_CAPABILITIES)
    if start.tools is not None:  # replaces what an earlier sessionStart declared
        decision.state.tools = [ClientTool.of_declared(tool) for tool in start.tools]
    if start.handoff is not None:
        _seed_from_handoff(decision, start.handoff)
    end_lost_stream(decision, now, settings)
    turn = decision.state.turn
    if start.last_seq is None and turn is not None and turn.tools is not None:
        for call in turn.tools.pending():
            if call.held or call.sent_to == decision.state.connection_id:  # a held change waits for a yes
                continue
            if call.name.startswith(MCP_TOOL_PREFIX):  # the conductor runs it, not the app
                continue
            call.sent_to = decision.state.connection_id
            decision.send(ToolCall(call_id=call.call_id, name=call.name, arguments=call.arguments))
    return decision.outcome()


def _seed_from_handoff(decision: Decision, handoff: Handoff) -> None:
    """A conversation continued from chat seeds a new session's memory: the summary and the last
    turns as history (text only). A session that already has history keeps it as it is."""
    state = decision.state
    if state.history_len or state.turn is not None or state.summary:
        decision.notes.append("handoff ignored: the session already has a conversation")
        return
    state.summary = handoff.summary.strip() or None
    state.origin = "handoff"
    state.title = state.title or clean_title(handoff.title or "")
    turns = list(handoff.recent_turns)
    while turns and turns[0].role == "assistant":  # the history starts with the user
        turns.pop(0)
    for turn in turns:
        if turn.text.strip():
            decision.history.add(turn.role, [text_block(turn.text.strip())])
    decision.notes.append(f"seeded from a handoff: {len(turns)} turns")


def _heard_of_segment(stream: ActiveStream, heard_text: str | None) -> str:
    """The text that ends a stopped segment on screen (its interrupted final): what the user heard
    of it, as the app reports it (less the text already finalized before it), else what was sent
    to tts.speak, shown as finals are (cards as their placeholders)."""
    if heard_text is not None:
        heard, before = heard_text.strip(), stream.said.strip()
        return heard[len(before) :].strip() if before and heard.startswith(before) else heard
    spoken = stream.text[: stream.spoken].strip()
    return split_answer(spoken).display.strip() if spoken else ""


def _cancel_turn(decision: Decision, reason: str, *, heard_text: str | None = None) -> None:
    """End the turn in progress so the stored history stays valid for Bedrock."""
    turn = decision.state.turn
    if turn is None:
        return
    if turn.stream is not None:
        # What the user heard: as the app reports it, else what it was asked to speak (text the
        # model wrote after that was never heard).
        said = (turn.stream.said + turn.stream.text[: turn.stream.spoken]).strip()
        if heard_text is not None:
            said = heard_text.strip()
        if said:
            decision.history.add("assistant", [text_block(f"{said} {INTERRUPTED_MARKER}")])
        decision.send(AssistantSpeechFinal(text=_heard_of_segment(turn.stream, heard_text), interrupted=True))
        turn.stream = None
        decision.notes.append(f"stream of turn {turn.turn_id} stopped: {reason}")
    if turn.tools is not None:
        for call in turn.tools.pending():
            call.result = tool_result_block(call.tool_use_id, f"cancelled: {reason}", error=True)
            if call.parts is not None:  # the pieces of its result that came are not needed
                decision.parts_dropped.append((call.call_id, call.parts.count))
                call.parts = None
        close_round(decision, turn)
        decision.notes.append(f"pending tool calls of turn {turn.turn_id} cancelled: {reason}")
    decision.state.turn = None
