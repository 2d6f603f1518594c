"""A tool result too big for one frame, sent by the app in parts (``part`` 0 to ``parts`` - 1).

API Gateway closes a connection on any frame over 32 KB, and neither a browser's WebSocket nor
Apple's ``URLSessionWebSocketTask`` can split one message into several frames: so a big result
comes as several ``toolResult`` events, each within one frame. Parts may be handled out of order
(two invocations at once), so each one is stored as an item of its own with the state change that
records it; the decision that records the last one asks the caller to read them all and decide
again on the whole text (``handle_assembled_result``), which answers the call as a single result
would, and drops the stored pieces. A part out of range, one sent twice, a count that changes or
a total over ``MAX_RESULT_CHARS`` answer the model's call as failed at once; parts that never all
arrive are failed ``PARTS_WINDOW_S`` after the first one (or at the call's deadline, if sooner), by
the deadline alarm the first part arms (``handle_tool_deadlines``). Pure.
"""

from __future__ import annotations

from typing import Literal

from shared.core.conductor import handle_tool_result
from shared.core.decision import DEFAULT_SETTINGS, CoreSettings, Decision, Outcome, PartWrite, error_payload
from shared.core.state import ModelCall, ResultParts, SessionState
from shared.wire.protocol import ErrorCode, ToolResult
from shared.wire.protocol_tools import MAX_RESULT_CHARS

PARTS_WINDOW_S = 30.0
"""How long after its first part a result in parts may take to arrive whole (an app sends all its
parts at once: this only bounds a connection that dropped in between)."""


def handle_tool_result_part(
    state: SessionState, result: ToolResult, settings: CoreSettings = DEFAULT_SETTINGS, *, now: float = 0.0
) -> Outcome:
    """Record one part of a call's result (stored with this commit); the last one to arrive
    lists the call in ``parts_complete``."""
    assert result.part is not None and result.parts is not None
    call = state.model_call(result.call_id)
    if call is None or call.result is not None:
        decision = Decision(state)
        decision.send(error_payload(ErrorCode.NO_PENDING_TOOL_CALL, f"no pending tool call {result.call_id!r}"))
        return decision.outcome()
    decision = Decision(state)
    call = decision.state.model_call(result.call_id)
    assert call is not None
    field: Literal["result", "error"] = "result" if result.result is not None else "error"
    text = result.result if result.result is not None else (result.error or "")
    parts = call.parts or ResultParts(count=result.parts, field=field, first_at=now, due=_due(call, now))
    problem = _problem(parts, result, field, len(text))
    if problem is not None:
        return _failed(decision, call, problem, settings, now)
    parts.received = sorted([*parts.received, result.part])
    parts.chars += len(text)
    call.parts = parts
    decision.part_writes.append(PartWrite(call.call_id, result.part, text))
    if len(parts.received) == parts.count:
        decision.parts_complete.append(call.call_id)
    return decision.outcome()


def _due(call: ModelCall, now: float) -> float:
    if not now:
        return 0.0
    return min(now + PARTS_WINDOW_S, call.deadline) if call.deadline else now + PARTS_WINDOW_S


def first_part_due(outcome: Outcome) -> float | None:
    """When the parts this decision began receiving must all be in: the deadline alarm to arm."""
    for write in outcome.part_writes:
        call = outcome.state.model_call(write.call_id)
        if call is not None and call.parts is not None and len(call.parts.received) == 1 and call.parts.due:
            return call.parts.due
    return None


def _problem(parts: ResultParts, result: ToolResult, field: str, chars: int) -> str | None:
    if result.parts != parts.count:
        return f"part {result.part} says {result.parts} parts, the first said {parts.count}"
    if result.part in parts.received:
        return f"part {result.part} arrived twice"
    if field != parts.field:
        return f"part {result.part} carries {field}, the others {parts.field}"
    if parts.chars + chars > MAX_RESULT_CHARS:
        return f"the parts hold more than {MAX_RESULT_CHARS:,} characters"
    return None


def _failed(decision: Decision, call: ModelCall, problem: str, settings: CoreSettings, now: float) -> Outcome:
    """Tell the app what was wrong, and answer the model's call as failed (the stored pieces go)."""
    decision.send(error_payload(ErrorCode.INVALID_EVENT, f"toolResult {call.call_id!r} in parts: {problem}"))
    if call.parts is not None:
        decision.parts_dropped.append((call.call_id, call.parts.count))
    call.parts = None
    failed = ToolResult(call_id=call.call_id, error=f"the app's result arrived in parts that do not fit: {problem}")
    return _then_answer(decision, failed, settings, now)


def handle_assembled_result(
    state: SessionState,
    call_id: str,
    pieces: list[tuple[int, str]],
    settings: CoreSettings = DEFAULT_SETTINGS,
    *,
    now: float = 0.0,
) -> Outcome:
    """All parts of ``call_id`` are stored (``pieces``: index and text, as read): answer the call
    with their text in order, as one result; the pieces are dropped with this commit."""
    decision = Decision(state)
    call = decision.state.model_call(call_id)
    if call is None or call.result is not None or call.parts is None:
        return decision.outcome()  # answered meanwhile (a deadline, a barge-in): nothing to do
    parts = call.parts
    decision.parts_dropped.append((call_id, parts.count))
    call.parts = None
    by_index = dict(pieces)
    if sorted(by_index) != list(range(parts.count)):
        missing = sorted(set(range(parts.count)) - set(by_index))
        failed = ToolResult(call_id=call_id, error=f"parts {missing} of the app's result were lost")
        return _then_answer(decision, failed, settings, now)
    text = "".join(by_index[index] for index in range(parts.count))
    if parts.field == "result":
        return _then_answer(decision, ToolResult(call_id=call_id, result=text), settings, now)
    return _then_answer(decision, ToolResult(call_id=call_id, error=text), settings, now)


def _then_answer(first: Decision, result: ToolResult, settings: CoreSettings, now: float) -> Outcome:
    """``first``'s events and part bookkeeping, then the decision on ``result`` as a whole result."""
    before = first.outcome()
    then = handle_tool_result(before.state, result, settings, now=now)
    return Outcome(
        then.state,
        [*before.events, *then.events],
        [*before.history, *then.history],
        then.run_model,
        [*before.notes, *then.notes],
        before.first_seq,
        before.part_writes,
        before.parts_complete,
        [*before.parts_dropped, *then.parts_dropped],
    )
