"""How a call the app runs is going, and stopping it: the rules of ``toolProgress``, the
conductor's own tools ``conductor.status`` and ``conductor.cancel``, and the "still running"
sentence of a foreground call that takes long. Pure.

* **Progress.** The app may send ``toolProgress`` for a call it runs (a background job, or a
  foreground call still waiting for its result): the latest one is kept on the call, in the
  session state (one per call, and the calls are bounded). Progress for any other call (unknown,
  answered, cancelled) is dropped without an answer: it may cross its own result on the wire.
* **Status.** ``conductor.status`` answers the model at once with each running call, how long it
  has run and its latest progress, so "how's the build going?" is answered from what the app said.
* **Cancel.** ``conductor.cancel`` stops a running call: the app gets a ``toolCancel``, the model
  its answer at once, and the call is forgotten, so a result that still comes is a late result
  (``no_pending_tool_call``). A background job is never reported after it.
* **No long silences.** A foreground call unanswered ``progress_after_s`` after it was sent gets one
  spoken line ("Still running tests.run, 40 %."), then at most one every ``progress_every_s``; never
  while the person speaks (it is put off), never once every call of the round is answered, never
  for a change held for the person's yes. The time comes from the tool-deadline alarm
  (``next_due``), which the runner arms with the round.
"""

from __future__ import annotations

import json

from shared.core.decision import SPEAK_TOOL, CoreSettings, Decision, Outcome
from shared.core.messages import tool_result_block
from shared.core.state import BackgroundJob, ModelCall, OwnPurpose, Progress, SessionState, ToolRound
from shared.wire.protocol import ToolCancel, ToolProgress
from shared.wire.protocol_tools import CANCEL_TOOL, MCP_TOOL_PREFIX, STATUS_TOOL

LISTENING_RETRY_S = 2.0
"""A sentence put off because the person speaks is tried again this much later."""


def handle_tool_progress(
    state: SessionState, progress: ToolProgress, *, now: float, said_at: float | None = None
) -> Outcome:
    """The latest progress of a running call, kept on it; nothing changes when no running call has
    that id (never an error: progress may cross its call's result on the wire). Two events of one
    call may be decided in either order (each frame has its own invocation): the one the app sent
    later (``said_at``, its timestamp) is kept, and on the same timestamp the further one."""
    decision = Decision(state)
    target = _running(decision.state, progress.call_id)
    if target is None:
        return decision.outcome()
    said = said_at if said_at is not None else now
    kept = target.progress
    if kept is not None and (kept.said_at, kept.fraction or 0.0) > (said, progress.fraction or 0.0):
        return decision.outcome()
    target.progress = Progress(fraction=progress.fraction, message=progress.message.strip(), at=now, said_at=said)
    # The other devices show it (``shared.flows.delivery`` leaves out the runner); every device, for a
    # call the conductor runs on an MCP server (no device knows of it otherwise).
    if decision.state.devices or target.name.startswith(MCP_TOOL_PREFIX):
        decision.unnumbered.append(
            ToolProgress(
                call_id=progress.call_id,
                name=target.name,
                fraction=progress.fraction,
                message=target.progress.message,
            )
        )
    return decision.outcome()


def _running(state: SessionState, call_id: str) -> BackgroundJob | ModelCall | None:
    job = next((job for job in state.background if job.call_id == call_id), None)
    if job is not None:
        return job
    call = state.model_call(call_id)
    if call is not None and call.result is None and not call.held:
        return call
    return None


def describe(progress: Progress | None) -> str:
    """``40 %, Compiling 41 of 120 files`` (empty without progress)."""
    if progress is None:
        return ""
    parts = []
    if progress.fraction is not None:
        parts.append(f"{round(progress.fraction * 100)} %")
    if progress.message:
        parts.append(progress.message)
    return ", ".join(parts)


# ---- the conductor's own tools -----------------------------------------------------------------


def answer_own_tool(decision: Decision, call: ModelCall, now: float) -> None:
    """Answer a call of ``conductor.status`` / ``conductor.cancel`` at once, in the round."""
    if call.name == STATUS_TOOL:
        text, failed = json.dumps(status(decision.state, now, exclude=call.call_id), ensure_ascii=False), False
    else:
        text, failed = cancel(decision, call, now)
    call.result = tool_result_block(call.tool_use_id, text, error=failed)


def status(state: SessionState, now: float, *, exclude: str = "") -> dict[str, object]:
    running: list[dict[str, object]] = []
    for job in state.background:
        running.append(_entry(job.call_id, job.name, "background", now - job.started_at, job.progress))
    turn = state.turn
    if turn is not None and turn.tools is not None:
        for call in turn.tools.pending():
            if call.call_id != exclude and not call.held:
                running.append(_entry(call.call_id, call.name, "foreground", now - turn.tools.sent_at, call.progress))
    return {"running": running} if running else {"running": [], "note": "no call of the app is running"}


def _entry(call_id: str, name: str, kind: str, seconds: float, progress: Progress | None) -> dict[str, object]:
    entry: dict[str, object] = {"callId": call_id, "name": name, "kind": kind, "runningFor": f"{max(0, seconds):.0f} s"}
    if progress is not None:
        if progress.fraction is not None:
            entry["progress"] = f"{round(progress.fraction * 100)} %"
        if progress.message:
            entry["message"] = progress.message
    else:
        entry["progress"] = "the app has not said"
    return entry


def cancel(decision: Decision, call: ModelCall, now: float) -> tuple[str, bool]:
    """Stop the call the arguments name; the model's answer and whether it failed."""
    try:
        arguments = json.loads(call.arguments)
    except ValueError:
        arguments = {}
    wanted_id = arguments.get("callId") if isinstance(arguments.get("callId"), str) else None
    wanted_name = arguments.get("name") if isinstance(arguments.get("name"), str) else None
    state = decision.state
    candidates: list[tuple[str, str, bool]] = [(job.call_id, job.name, True) for job in state.background]
    if state.turn is not None and state.turn.tools is not None:
        candidates += [
            (other.call_id, other.name, False)
            for other in state.turn.tools.pending()
            if other.call_id != call.call_id and other.name not in (STATUS_TOOL, CANCEL_TOOL)
        ]
    if wanted_id:
        chosen = [candidate for candidate in candidates if candidate[0] == wanted_id]
    elif wanted_name:
        chosen = [candidate for candidate in candidates if candidate[1] == wanted_name][-1:]
    else:
        chosen = candidates if len(candidates) == 1 else []
    if not chosen:
        if not candidates:
            return "nothing to cancel: no call of the app is running", True
        names = ", ".join(f"{name} ({call_id})" for call_id, name, _ in candidates)
        return f"say which call to cancel (callId or name); running: {names}", True
    call_id, name, is_job = chosen[0]
    reason = "cancelled by the user"
    if is_job:
        decision.state.background = [job for job in decision.state.background if job.call_id != call_id]
    else:
        assert decision.state.turn is not None and decision.state.turn.tools is not None
        target = next(other for other in decision.state.turn.tools.calls if other.call_id == call_id)
        target.parts = None
        target.result = tool_result_block(target.tool_use_id, f"cancelled: {reason}", error=True)
    if not name.startswith(MCP_TOOL_PREFIX):  # a call on an MCP server: its runner sees it and cancels it there
        decision.send(ToolCancel(call_id=call_id, name=name, reason=reason))
    decision.notes.append(f"tool call {call_id} ({name}) cancelled by the model")
    return json.dumps({"cancelled": True, "callId": call_id, "name": name}), False


# ---- the "still running" sentence -------------------------------------------------------------


def _waiting(round_: ToolRound) -> list[ModelCall]:
    return [call for call in round_.pending() if not call.held]


def progress_due(state: SessionState, settings: CoreSettings) -> float | None:
    """When the next "still running" sentence is due (epoch seconds), or None."""
    turn = state.turn
    if settings.progress_after_s <= 0 or turn is None or turn.tools is None or not turn.tools.sent_at:
        return None
    if turn.stream is not None or not _waiting(turn.tools):
        return None
    return turn.tools.progress_next_at or turn.tools.sent_at + settings.progress_after_s


def speak_progress(decision: Decision, settings: CoreSettings, now: float) -> None:
    """Say "still running …" when it is due (or put it off while the person speaks)."""
    due = progress_due(decision.state, settings)
    turn = decision.state.turn
    if due is None or now < due or turn is None or turn.tools is None:
        return
    if decision.state.listening is not None:
        turn.tools.progress_next_at = now + LISTENING_RETRY_S
        return
    waiting = _waiting(turn.tools)
    call = max(waiting, key=lambda other: other.progress.at if other.progress else 0.0)
    turn.tools.progress_next_at = now + max(settings.progress_every_s, LISTENING_RETRY_S)
    decision.own_call(SPEAK_TOOL, {"text": progress_line(call)}, OwnPurpose.SPEAK_PROGRESS, turn.turn_id)
    decision.notes.append(f"progress line for {call.call_id} ({call.name})")


def progress_line(call: ModelCall) -> str:
    said = describe(call.progress)
    return f"Still running {call.name}, {said}." if said else f"Still running {call.name}…"
