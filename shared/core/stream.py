"""The model stream's decisions: claiming a launched stream, each piece the model streams, how its
message ends (every Bedrock stop reason), and a stream that failed or lost its runner."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from shared.core import background, confirming, devices, mcp_tools, person_memory, progress
from shared.core.decision import (
    CoreSettings,
    Decision,
    Outcome,
    StreamSuperseded,
    close_round,
    deadline_of,
    error_payload,
    tool_names,
)
from shared.core.failure_lines import FailureCause, failure_line
from shared.core.inline_reasoning import reasoning_words, without_reasoning
from shared.core.mcp_tools import Offered
from shared.core.messages import ERROR_MARKER, text_block, tool_result_block
from shared.core.model_output import ModelMessage
from shared.core.person_memory import MemoryAnswer
from shared.core.speakable import Answer, card_patch, split_answer
from shared.core.state import ActiveStream, ModelCall, OwnPurpose, SessionState, ToolRound, Turn, Usage
from shared.core.wrapper import RejectedUse, UnwrappedCall, unwrap_tool_use
from shared.wire.protocol import AssistantSpeechFinal, AssistantUIPatch, ErrorCode
from shared.wire.protocol_tools import CONDUCTOR_TOOL_NAMES, MEMORY_TOOL_NAMES

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
EMPTY_REPLY_MARKER = "[no answer: the model said nothing]"
CONTEXT_FULL_MARKER = "[cut off: the conversation filled the context window]"


@dataclass(frozen=True)
class RunnerClaim:
    """The turn-runner invocation streaming: the first commit it makes claims the stream for it,
    every later one checks it still holds it (no separate write to claim)."""

    runner: str
    deadline: float  # epoch seconds: the invocation's timeout


class StreamTaken(Exception):
    """Another runner invocation already holds this stream (an asynchronous invoke delivered twice)."""


def _current_stream(decision: Decision, stream_id: str, claim: RunnerClaim | None = None) -> tuple[Turn, ActiveStream]:
    turn = decision.state.turn
    if turn is None or turn.stream is None or turn.stream.stream_id != stream_id:
        raise StreamSuperseded(stream_id)
    if turn.speculative is not None:  # nothing of a speculation is said before its final confirms it
        raise StreamSuperseded(stream_id)
    stream = turn.stream
    if claim is not None:
        if stream.runner is not None and stream.runner != claim.runner:
            raise StreamTaken(stream_id)
        stream.runner, stream.deadline = claim.runner, claim.deadline
        stream.unposted = None  # the runner posts them as it claims
    return turn, stream


def check_stream(state: SessionState, stream_id: str, claim: RunnerClaim) -> None:
    """Raise ``StreamSuperseded`` / ``StreamTaken`` unless the stream is still this runner's to
    stream (a read between commits: nothing is decided)."""
    _current_stream(Decision(state), stream_id, claim)


def claim_stream(state: SessionState, stream_id: str, runner: str, *, deadline: float) -> Outcome:
    """A turn-runner invocation takes the stream it was launched for; only one ever does.

    Raises ``StreamSuperseded`` when the stream is no longer the session's (barge-in, new turn)
    and ``StreamTaken`` when another invocation holds it.
    """
    decision = Decision(state)
    _current_stream(decision, stream_id, RunnerClaim(runner, deadline))
    return decision.outcome()


def _sync_text(stream: ActiveStream, text: str | None) -> None:
    """The runner holds the segment's live text and hands it over at each commit."""
    if text is not None:
        stream.text = text


def stream_speak(
    state: SessionState, stream_id: str, text: str, until: int, claim: RunnerClaim | None = None
) -> Outcome:
    """Completed sentences of the segment (``text[spoken:until]``) go to tts.speak while the model
    still writes (apps that announced sentence speech); a code block among them goes to the
    screen as a card."""
    decision = Decision(state)
    turn, stream = _current_stream(decision, stream_id, claim)
    _sync_text(stream, text)
    piece = stream.text[stream.spoken : until].strip()
    if until > stream.spoken:
        stream.spoken = until
    if piece:
        answer = split_answer(piece)
        show_cards(decision, answer)
        if answer.speech:
            decision.speak_sentences(answer.speech, turn.turn_id)
    return decision.outcome()


def show_cards(decision: Decision, answer: Answer) -> None:
    for card in answer.cards:
        decision.send(AssistantUIPatch(patch=card_patch(card)))


def stream_tool_started(
    state: SessionState, stream_id: str, claim: RunnerClaim | None = None, *, text: str | None = None
) -> Outcome:
    """Text said before a tool call is finalized and spoken before the call goes out."""
    decision = Decision(state)
    turn, stream = _current_stream(decision, stream_id, claim)
    _sync_text(stream, text)
    finalize_segment(decision, turn, stream, OwnPurpose.SPEAK_BEFORE_TOOLS)
    return decision.outcome()


@dataclass(frozen=True)
class StreamReport:
    """What the runner streaming ``stream_id`` reports when the model's message is complete.

    ``claim``: the runner's (None: any may end it). ``text``: the current segment's text as the
    runner has it (never written per delta). ``now``: when it ends (0: no deadlines, no timings).
    ``window_cap``: the runner had to send fewer messages than the window to fit the model's
    context; later requests start from that. ``chars_per_token``: what the message's request
    measured, kept for the next budgets. ``usage``: the request's tokens, added to the turn's.
    ``first_partial_at`` / ``first_speak_at``: the invocation's first partial and ``tts.speak``
    (epoch seconds), the turn's if it had none yet.
    """

    stream_id: str
    message: ModelMessage
    claim: RunnerClaim | None = None
    text: str | None = None
    now: float = 0.0
    window_cap: int | None = None
    chars_per_token: float | None = None
    usage: Usage | None = None
    first_partial_at: float | None = None
    first_speak_at: float | None = None
    # The memory tools' answers, by tool use id: the runner made their calls (they need I/O) before
    # reporting (``shared.flows.memory_calls``).
    memory_answers: Mapping[str, MemoryAnswer] = field(default_factory=dict)
    # The tools of the stage's MCP servers the runner offered this request, by the name the model
    # calls them (``shared.core.mcp_tools``); servers the runner could not reach, to tell the model once.
    mcp_tools: Mapping[str, Offered] = field(default_factory=dict)


def stream_finished(state: SessionState, report: StreamReport, settings: CoreSettings) -> Outcome:
    """The model's message is complete: speak it, forward its tool calls, or end the turn."""
    decision = Decision(state)
    turn, stream = _current_stream(decision, report.stream_id, report.claim)
    _sync_text(stream, report.text)
    turn.stream = None
    _count_usage(turn, report.usage, report.first_partial_at, report.first_speak_at)
    now, message = report.now, report.message
    decision.now = now
    if report.window_cap is not None:
        decision.state.window_cap = report.window_cap
    if report.chars_per_token is not None:
        decision.state.chars_per_token = report.chars_per_token
    if message.stop_reason not in NORMAL_STOPS:
        _finish_abnormal(decision, turn, stream, message)
        return decision.outcome()
    content = message.history_content()
    if not message.tool_uses:
        if not any("text" in block for block in content):  # keeps the roles alternating
            content = [*content, text_block(EMPTY_REPLY_MARKER)]
        decision.history.add("assistant", content)
        if finalize_segment(decision, turn, stream, OwnPurpose.SPEAK_FINAL):
            return decision.outcome()  # the turn ends when the app has spoken it
        decision.end_turn(turn, now)
        return decision.outcome()
    finalize_segment(decision, turn, stream, OwnPurpose.SPEAK_BEFORE_TOOLS)
    turn.rounds += 1
    round_ = ToolRound(
        assistant_content=content, tool_use_order=[use.tool_use_id for use in message.tool_uses], sent_at=now
    )
    turn.tools = round_
    if turn.rounds > settings.max_tool_rounds:
        for use in message.tool_uses:
            round_.rejected[use.tool_use_id] = tool_result_block(
                use.tool_use_id, "cancelled: too many tool rounds in one turn", error=True
            )
        close_round(decision, turn)
        decision.send(
            error_payload(
                ErrorCode.CONDUCTOR_ERROR,
                f"the turn stopped after {settings.max_tool_rounds} rounds of tool calls",
            )
        )
        decision.end_turn(turn, now)
        return decision.outcome()
    taken = set(decision.state.recent_call_ids)
    known = tool_names(decision.state, settings) | set(report.mcp_tools)
    if len(report.mcp_tools) > mcp_tools.MAX_SHOWN:
        known |= {mcp_tools.SEARCH_TOOL}
    for use in message.tool_uses:
        unwrapped = unwrap_tool_use(
            use.tool_use_id,
            use.name,
            use.input,
            catalog_names=known,
            taken_call_ids=taken,
        )
        if isinstance(unwrapped, RejectedUse):
            round_.rejected[use.tool_use_id] = tool_result_block(use.tool_use_id, unwrapped.reason, error=True)
            decision.send(error_payload(ErrorCode.INVALID_TOOL_CALL, unwrapped.reason))
            continue
        taken.add(unwrapped.call_id)
        if unwrapped.name == mcp_tools.SEARCH_TOOL or unwrapped.name in report.mcp_tools:
            _mcp_call(decision, turn, round_, use.tool_use_id, unwrapped, report, settings, now)
            continue
        runs_it = devices.tool_device(decision.state, unwrapped.name, settings)
        if runs_it is None and unwrapped.name not in CONDUCTOR_TOOL_NAMES:
            reason = f"no device of the session runs {unwrapped.name} right now: it is unavailable"
            round_.rejected[use.tool_use_id] = tool_result_block(use.tool_use_id, reason, error=True)
            decision.notes.append(f"{unwrapped.name}: no device runs it")
            continue
        call = ModelCall(
            call_id=unwrapped.call_id,
            tool_use_id=use.tool_use_id,
            name=unwrapped.name,
            arguments=unwrapped.arguments,
            sent_to=decision.state.connection_id,
            device=runs_it if decision.state.devices else None,
            deadline=now + deadline_of(decision.state, settings, unwrapped.name) if now else 0.0,
        )
        round_.calls.append(call)
        if call.name in MEMORY_TOOL_NAMES:  # answered by the runner's calls of the memory, never sent
            person_memory.answer_call(decision.state, call, report.memory_answers.get(use.tool_use_id))
            continue
        if call.name in CONDUCTOR_TOOL_NAMES:  # the conductor's own tools: answered here, never sent
            progress.answer_own_tool(decision, call, now)
            continue
        if confirming.needs_confirmation(decision.state, settings, call.name, runs_it):
            confirming.hold(decision, turn, call, now, settings)
            continue
        decision.show("executing")
        decision.dispatch(call)
        if background.is_background(decision.state, settings, call.name):
            background.start_in_background(decision, call, now)
    confirming.listen(decision, turn)
    decision.remember_call_ids([call.call_id for call in round_.calls])
    if not round_.pending():
        close_round(decision, turn)  # malformed, background or own uses only: the model goes on at once
        decision.start_stream(turn, stream.launched_at)
        # The same runner goes on with the new stream (nothing is launched): it stays the holder.
        assert turn.stream is not None
        turn.stream.runner, turn.stream.deadline = stream.runner, stream.deadline
    return decision.outcome()


def _mcp_call(
    decision: Decision,
    turn: Turn,
    round_: ToolRound,
    tool_use_id: str,
    unwrapped: UnwrappedCall,
    report: StreamReport,
    settings: CoreSettings,
    now: float,
) -> None:
    """A call of a tool on an MCP server: the conductor runs it (no device is sent it), at once when
    the tool only reads, after the person's yes when it may change things; ``mcp.search`` is answered here."""
    call = ModelCall(
        call_id=unwrapped.call_id,
        tool_use_id=tool_use_id,
        name=unwrapped.name,
        arguments=unwrapped.arguments,
        deadline=now + deadline_of(decision.state, settings, unwrapped.name) if now else 0.0,
    )
    round_.calls.append(call)
    if unwrapped.name == mcp_tools.SEARCH_TOOL:
        query = str(_arguments(unwrapped.arguments).get("query") or "")
        answer = mcp_tools.search(list(report.mcp_tools.values()), query)
        call.result = tool_result_block(tool_use_id, answer, error=False)
        return
    offered = report.mcp_tools[unwrapped.name]
    if offered.asks_first:
        confirming.hold(decision, turn, call, now, settings)
        return
    decision.show("executing")
    decision.dispatch(call)
    if offered.background:
        background.start_in_background(decision, call, now)


def _arguments(text: str) -> dict[str, object]:
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _count_usage(turn: Turn, usage: Usage | None, first_partial_at: float | None, first_speak_at: float | None) -> None:
    """The request's tokens join the turn's; its first partial and speech, if the turn had none yet
    (a message whose only speech is its final is spoken now)."""
    if usage is not None:
        turn.usage.add(usage)
    if turn.first_partial_at is None and first_partial_at is not None:
        turn.first_partial_at = first_partial_at
    if turn.first_speak_at is None and first_speak_at is not None:
        turn.first_speak_at = first_speak_at


def _finish_abnormal(decision: Decision, turn: Turn, stream: ActiveStream, message: ModelMessage) -> None:
    """A message that stopped for another reason than finishing: its tool uses never run (a
    cut-off or filtered tool input must not reach the app, and re-asking would loop); the text is
    kept and spoken with a line that says why; the turn ends once it is spoken."""
    stop = message.stop_reason
    said = without_reasoning(stream.text).strip()  # what the user may see of it
    rest = stream.text[stream.spoken :].strip()  # not yet sent to tts.speak
    written = " ".join(block["text"] for block in message.history_content() if "text" in block)
    line: str | None = None  # said after the text (all of it, when the text is not for the user)
    if stop == CUT_OFF_STOP:
        line, marker = CUT_OFF_LINE, CUT_OFF_MARKER
    elif stop in FILTERED_STOPS:
        # A guardrail's text is its own configured message; a filtered reply's text is not for the user.
        keep = stop == "guardrail_intervened" and said
        line, marker = (None if keep else FILTERED_LINE), FILTERED_MARKER
        written = stream.text.strip() if keep else ""
        said = said if keep else ""
    elif stop in MALFORMED_STOPS:
        decision.send(error_payload(ErrorCode.BEDROCK_ERROR, f"the model's reply was malformed ({stop})"))
        line, marker, written, said = MALFORMED_LINE, MALFORMED_MARKER, "", ""
    elif stop == CONTEXT_FULL_STOP:
        line, marker = CONTEXT_FULL_LINE, CONTEXT_FULL_MARKER
    else:
        decision.notes.append(f"unknown stop reason {stop!r}: the turn ends with what was said")
        line, marker = (None if said else STALL_FALLBACK_LINE), ""
    if not said:
        rest = ""  # text not for the user: only the line is spoken (sentences already spoken stay so)
    rest_answer = split_answer(rest) if rest else None
    if rest_answer is not None:  # a code block or long list still to be said goes on screen, as the speech says
        show_cards(decision, rest_answer)
    shown = _with_note(split_answer(said).display if said else "", line, "\n\n")
    say = _with_note(rest_answer.speech if rest_answer is not None else "", line, " ")
    if message.tool_uses:
        decision.notes.append(f"{len(message.tool_uses)} tool use(s) dropped: stop reason {stop!r}")
    decision.history.add("assistant", [text_block(f"{written} {marker}".strip() or shown)])
    stream.said += stream.text
    stream.text, stream.spoken = "", 0
    if not decision.speak(shown, OwnPurpose.SPEAK_FINAL, turn.turn_id, say=say):
        decision.end_turn(turn)


def _with_note(text: str, line: str | None, gap: str) -> str:
    """A line said after the text stands apart from it: its own paragraph on screen (``gap``), its
    own sentence in speech. Text with a line after it was cut short, so unless it ended a sentence
    (or a card) it trails off ("Qubits are…") instead of running into the line."""
    text = text.strip()
    if not line or not text:
        return line or text
    if text[-1] not in ".!?\u2026\"')]\u201d\u2019":
        text = text.rstrip(",;:-\u2013\u2014 ") + "\u2026"
    return f"{text}{gap}{line}"


def stream_failed(
    state: SessionState,
    stream_id: str,
    code: ErrorCode,
    message: str,
    *,
    fallback_line: str | None = None,
    claim: RunnerClaim | None = None,
    text: str | None = None,
    cause: FailureCause | None = None,
) -> Outcome:
    """The model failed (or the turn ran out of time): keep what was said, report, go idle.

    With ``fallback_line`` (a stalled stream) the app also speaks a short line, so the user
    hears why nothing more is coming; the turn then ends when it has been spoken. Without one, a
    stream that spoke nothing speaks the line of its ``cause`` (``shared.core.failure_lines``) as a
    ``tts.speak`` alone: the app shows the error event, and the final stays the model's words.
    With ``claim``, only a runner that holds the stream (or finds it unclaimed) may end it.
    ``text``: the current segment's text as the runner has it.
    """
    decision = Decision(state)
    turn, stream = _current_stream(decision, stream_id, claim)
    _sync_text(stream, text)
    _fail_stream(decision, turn, stream, code, message, fallback_line, cause)
    return decision.outcome()


def _fail_stream(
    decision: Decision,
    turn: Turn,
    stream: ActiveStream,
    code: ErrorCode,
    message: str,
    fallback_line: str | None,
    cause: FailureCause | None = None,
) -> None:
    # The person would hear nothing at all: the line of the failure's cause is spoken (not shown:
    # the error event is what the app shows; a final stays the model's words).
    heard_line = (
        failure_line(code, cause) if fallback_line is None and not stream.said.strip() and not stream.spoken else None
    )
    said = (stream.said + stream.text).strip()
    # The history always gets the model's side of this turn, even when it said nothing: the next
    # utterance then starts a new user message instead of growing the one that just failed.
    decision.history.add("assistant", [text_block(f"{said} {ERROR_MARKER}" if said else f"[no answer: {message}]")])
    if shown := without_reasoning(stream.text).strip():
        decision.send(AssistantSpeechFinal(text=split_answer(shown).display or shown))
    turn.stream = None
    decision.send(error_payload(code, message))
    if fallback_line:
        decision.speak(fallback_line, OwnPurpose.SPEAK_FINAL, turn.turn_id)
        return
    if heard_line:
        decision.speak_line(heard_line, OwnPurpose.SPEAK_FINAL, turn.turn_id)
        return
    decision.end_turn(turn)


def end_lost_stream(decision: Decision, now: float, settings: CoreSettings) -> None:
    """End a stream whose runner is gone: never claimed in time, or held past its deadline."""
    turn = decision.state.turn
    stream = turn.stream if turn is not None else None
    if turn is None or stream is None or not now:
        return
    never_started = stream.runner is None and now - stream.launched_at > settings.stream_start_timeout_s
    overran = stream.deadline is not None and now > stream.deadline
    if (never_started or overran) and turn.speculative is not None:
        decision.state.turn = None  # nothing of it was said: it ends without a word
        decision.notes.append(f"speculative turn {turn.turn_id} lost its runner: dropped")
    elif never_started or overran:
        decision.notes.append(f"stream {stream.stream_id} lost its runner: the turn ends")
        reason = "the turn never started" if never_started else "the turn stopped unexpectedly"
        _fail_stream(decision, turn, stream, ErrorCode.CONDUCTOR_ERROR, reason, RUNNER_LOST_LINE)


def finalize_segment(decision: Decision, turn: Turn, stream: ActiveStream, purpose: OwnPurpose) -> bool:
    """Send the segment's cards (code, diffs, long lists), its final (the whole text as shown: the
    code is on the cards) and a tts.speak of what was not spoken yet, made speakable; False when
    nothing was sent to speak. Reasoning is never spoken: a segment that is only reasoning before
    the model's tool calls (Nova writes its plan as ``<thinking>…</thinking>`` and acts) shows the
    plan's words, without the tags, as the segment's final, and says nothing."""
    text = without_reasoning(stream.text).strip()
    rest = stream.text[stream.spoken :].strip()
    plan = reasoning_words(stream.text) if not text and purpose is OwnPurpose.SPEAK_BEFORE_TOOLS else ""
    stream.said += stream.text
    stream.text, stream.spoken = "", 0
    if plan:
        decision.send(AssistantSpeechFinal(text=plan))
    if not text:
        return False
    rest_answer = split_answer(rest)
    show_cards(decision, rest_answer)
    shown = split_answer(text).display if rest != text else rest_answer.display
    return decision.speak(shown or text, purpose, turn.turn_id, say=rest_answer.speech)
