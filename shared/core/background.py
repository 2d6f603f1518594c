"""Background tools: a long tool (a build, a test run) that does not hold the turn.

A call of a tool declared ``background`` (the catalog's ``build.run`` and ``tests.run``) goes to
the app as usual, but the model gets a result at once saying it started, says so, and the turn
ends: the person can go on talking about other things. The call is kept as a *job* of the session
(it survives reconnects and is in the session state). When the app's real result arrives, before
the job's deadline, the conductor starts a turn of its own whose request holds the outcome, so the
model reports it in a sentence or two (a failure also as a card); if a turn is running then, the
report waits for it to end (``Decision.end_turn``; the report turn is
``Decision.start_background_report``, its words ``shared.core.background_report``). A deadline that
passes is reported the same way. Barge-ins and new requests end turns, never jobs. Pure.
"""

from __future__ import annotations

import json

from shared.core.decision import CoreSettings, Decision, Outcome, close_round
from shared.core.messages import cap_tool_result, tool_result_block
from shared.core.state import BackgroundJob, BackgroundReport, ModelCall, SessionState
from shared.wire.protocol import ToolResult


def is_background(state: SessionState, settings: CoreSettings, name: str) -> bool:
    if state.tools is not None:
        return any(tool.name == name and tool.background for tool in state.tools)
    return name in settings.background_tools


def start_in_background(decision: Decision, call: ModelCall, now: float) -> None:
    """The call goes to the app; the model hears at once that it started."""
    started = {
        "started": True,
        "background": True,
        "note": f"{call.name} runs in the background; its result will be reported to the user when it arrives",
    }
    call.result = tool_result_block(call.tool_use_id, json.dumps(started), error=False)
    decision.state.background.append(
        BackgroundJob(
            call_id=call.call_id,
            name=call.name,
            arguments=call.arguments,
            device=call.device,
            started_at=now,
            deadline=call.deadline,
        )
    )


def move_to_background(state: SessionState, call_id: str, *, now: float, deadline: float) -> Outcome:
    """A foreground call still running past its time (a slow tool on an MCP server) goes on in the
    background: the model hears at once that it started, the turn goes on, the outcome is reported
    later. Nothing changes when the call is no longer pending (answered, cancelled, the turn gone)."""
    decision = Decision(state)
    turn = decision.state.turn
    call = decision.state.model_call(call_id)
    if turn is None or turn.tools is None or call is None or call.result is not None or call.held:
        return decision.outcome()
    call.deadline = deadline
    start_in_background(decision, call, now)
    if not turn.tools.pending():
        close_round(decision, turn)
        decision.start_stream(turn, now)
    return decision.outcome()


def job_of(state: SessionState, call_id: str) -> BackgroundJob | None:
    return next((job for job in state.background if job.call_id == call_id), None)


def handle_background_result(state: SessionState, result: ToolResult, settings: CoreSettings, *, now: float) -> Outcome:
    """The app's result for a job: reported now when the session is idle, else after the turn."""
    decision = Decision(state)
    job = job_of(decision.state, result.call_id)
    assert job is not None
    failed = result.error is not None
    text = result.error if failed else (result.result if result.result is not None else "null")
    _report(decision, job, cap_tool_result(text or "", settings.max_tool_result_chars), failed=failed, now=now)
    return decision.outcome()


def expire_jobs(decision: Decision, now: float) -> None:
    """Jobs past their deadline are reported as never finished."""
    for job in [job for job in decision.state.background if job.deadline and now >= job.deadline]:
        waited = job.deadline - job.started_at
        _report(decision, job, f"no result came from the app within {waited:.0f} s", failed=True, now=now)


def next_job_deadline(state: SessionState) -> float | None:
    deadlines = [job.deadline for job in state.background if job.deadline]
    return min(deadlines) if deadlines else None


def _report(decision: Decision, job: BackgroundJob, text: str, *, failed: bool, now: float) -> None:
    decision.state.background = [other for other in decision.state.background if other.call_id != job.call_id]
    decision.state.background_reports.append(
        BackgroundReport(call_id=job.call_id, name=job.name, text=text, failed=failed, started_at=job.started_at)
    )
    decision.notes.append(f"background {job.name} ({job.call_id}) {'failed' if failed else 'finished'}")
    if decision.state.turn is None and decision.state.listening is None:  # not while the person speaks
        decision.start_background_report(now)
