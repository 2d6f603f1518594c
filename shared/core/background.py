"""Background tools: a long tool (a build, a test run) that does not hold the turn.

A call of a tool declared ``background`` (the catalog's ``build.run`` and ``tests.run``) goes to
the app as usual, but the model gets a result at once saying it started, says so, and the turn
ends: the person can go on talking about other things. The call is kept as a *job* of the session
(it survives reconnects and is in the session state). When the app's real result arrives, before
the job's deadline, the conductor starts a turn of its own whose request holds the outcome, so the
model reports it in a sentence or two (a failure also as a card); if a turn is running then, the
report waits for it to end (``Decision.end_turn``). A deadline that passes is reported the same
way. Barge-ins and new requests end turns, never jobs. Pure.
"""

from __future__ import annotations

import json

from shared.core.decision import CoreSettings, Decision, Outcome, new_id
from shared.core.messages import cap_tool_result, text_block, tool_result_block
from shared.core.speakable import Card, card_patch
from shared.core.state import BackgroundJob, BackgroundReport, ModelCall, SessionState, Turn
from shared.protocol import AssistantUIPatch, ToolResult

REPORT_MARKER = "[background report]"
"""Starts the user message that carries background outcomes to the model (never the person's words)."""
CARD_BODY_CHARS = 4000


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
            call_id=call.call_id, name=call.name, arguments=call.arguments, started_at=now, deadline=call.deadline
        )
    )


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
        start_report(decision, now)


def start_report(decision: Decision, now: float) -> None:
    """A turn of the conductor's own: the waiting outcomes go to the model, which tells the person."""
    reports, decision.state.background_reports = decision.state.background_reports, []
    for report in reports:
        if report.failed:
            body = report.text[:CARD_BODY_CHARS]
            card = Card(type="list", title=f"{report.name} failed", language=None, file=None, body=body)
            decision.send(AssistantUIPatch(patch=card_patch(card)))
    turn = Turn(turn_id=new_id("turn"))
    decision.state.turn = turn
    decision.history.add("user", [text_block(report_text(reports, now))])
    decision.set_state("thinking", turn.turn_id)
    decision.start_stream(turn, now)
    decision.notes.append(f"report turn {turn.turn_id}: {[report.name for report in reports]}")


def report_text(reports: list[BackgroundReport], now: float) -> str:
    lines = [REPORT_MARKER]
    for report in reports:
        seconds = max(0.0, now - report.started_at) if now and report.started_at else 0.0
        when = f"started {seconds / 60:.0f} min ago" if seconds >= 90 else f"started {seconds:.0f} s ago"
        outcome = "did not succeed" if report.failed else "finished"
        lines.append(f"The {report.name} you started in the background ({when}) {outcome}: {report.text}")
    lines.append("Tell the user the outcome in a sentence or two, without reading the output aloud.")
    return "\n".join(lines)
